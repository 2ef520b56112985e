// Replays a fuzz target's corpus without libFuzzer: every file under the
// directory given as the first argument (a runfile path such as
// tests/fuzz/corpus/fuzz_wire) is fed to LLVMFuzzerTestOneInput. Built with
// the ordinary compiler, this keeps every seed and every input that once
// crashed a parser in the normal test suite (and under --config=asan).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/test_paths.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {
std::string g_corpus;

std::vector<std::filesystem::path> corpus_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(nmad_test::runfile(g_corpus)))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}
}  // namespace

TEST_CASE("every corpus input runs through the parser cleanly") {
  REQUIRE(!g_corpus.empty());
  const auto files = corpus_files();
  // The corpus is part of the tree: an empty one means a broken data dep.
  REQUIRE(files.size() >= 10);
  for (const auto& f : files) {
    CAPTURE(f.string());
    std::ifstream in(f, std::ios::binary);
    REQUIRE(in);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()) == 0);
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && argv[1][0] != '-') {
    g_corpus = argv[1];
    --argc;
    ++argv;
    argv[0] = argv[-1];
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
