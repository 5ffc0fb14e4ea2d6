// Monte Carlo estimate of pi with MPI: the stand-in for the program in mpi-operator's pi example images.
//
// Each rank draws kPointsPerRank points uniformly in the square [-1, 1] x [-1, 1] from a
// std::minstd_rand seeded with its rank, and counts those inside the unit circle. Rank 0 adds up
// the counts and prints the estimate. The output is deterministic for a given number of ranks
// (with libstdc++, 2 ranks print "pi is approximately 3.1410376000000002").
#include <mpi.h>

#include <cstdio>
#include <random>

namespace {

constexpr long long kPointsPerRank = 10000000;

long long CountHits(int seed) {
  std::minstd_rand engine(seed);
  std::uniform_real_distribution<double> coordinate(-1.0, 1.0);
  long long hits = 0;
  for (long long i = 0; i < kPointsPerRank; ++i) {
    const double x = coordinate(engine);
    const double y = coordinate(engine);
    if (x * x + y * y <= 1.0) {
      ++hits;
    }
  }
  return hits;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);

  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  if (rank == 0) {
    std::printf("Workers: %d\n", size);
  }
  char host[MPI_MAX_PROCESSOR_NAME];
  int host_len = 0;
  MPI_Get_processor_name(host, &host_len);
  std::printf("Rank %d on host %.*s\n", rank, host_len, host);
  std::fflush(stdout);

  long long hits = CountHits(rank);
  long long total_hits = 0;
  MPI_Reduce(&hits, &total_hits, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);

  if (rank == 0) {
    const double points = static_cast<double>(kPointsPerRank) * size;
    const double pi = 4.0 * static_cast<double>(total_hits) / points;
    std::printf("pi is approximately %.16lf\n", pi);
    std::fflush(stdout);
  }

  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
