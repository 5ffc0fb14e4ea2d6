"""`python -m mpi_discovery`: placeholder entry point until the elastic issue fills it."""

import sys


def main() -> int:
    print("mpi-discover-hosts: not implemented yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
