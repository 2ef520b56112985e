"""A libFuzzer target and its corpus replay test."""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_test")

def nmad_fuzz_target(name, srcs, deps = [], linkopts = [], size = "small"):
    """Declares `name` (the libFuzzer binary, built with --config=fuzz only:
    tagged manual) and `name_replay_test` (every file of corpus/<name>
    through the same entry point, ordinary compiler, normal suite)."""
    cc_binary(
        name = name,
        srcs = srcs,
        deps = deps,
        linkopts = linkopts + ["-fsanitize=fuzzer"],
        tags = ["manual"],
    )
    cc_test(
        name = name + "_replay_test",
        size = size,
        srcs = srcs + ["replay_main.cpp"],
        deps = deps + ["//tests:test_paths"],
        linkopts = linkopts,
        args = ["tests/fuzz/corpus/" + name],
        data = native.glob(["corpus/" + name + "/**"]),
    )
