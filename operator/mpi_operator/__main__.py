"""`python -m mpi_operator` is the same as the `mpi-operator` console script."""

from mpi_operator.cli import main

raise SystemExit(main())
