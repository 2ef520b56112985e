"""Tests of bench/report/report.py (statistics, ratios, markdown, plots,
parsers) on recorded sample data in tests/compare/data/.

    /usr/bin/python3 -m unittest discover -s tests/compare -v
"""

import copy
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(HERE, "data")
sys.path.insert(0, os.path.join(REPO, "bench", "report"))

import report  # noqa: E402

try:
    import matplotlib  # noqa: F401
    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def load(name, raw=False):
    with open(os.path.join(DATA, name)) as f:
        return json.load(f) if name.endswith(".json") and not raw else f.read()


class StatisticsTest(unittest.TestCase):
    def test_summarize_odd_and_even_counts(self):
        st = report.summarize([3.0, 1.0, 2.0])
        self.assertEqual((st["median"], st["min"], st["max"], st["n"]), (2.0, 1.0, 3.0, 3))
        self.assertAlmostEqual(st["spread_pct"], 100.0)
        st = report.summarize([0.8, 1.0, 0.9, 1.2])
        self.assertAlmostEqual(st["median"], 0.95)
        self.assertEqual((st["min"], st["max"], st["n"]), (0.8, 1.2, 4))
        self.assertIsNone(report.summarize([]))
        self.assertEqual(report.summarize([5])["median"], 5.0)

    def test_imb_overlap_formula(self):
        # max(0, min(1, (t_comm + t_comp - t_ovrl) / min(t_comm, t_comp)))
        self.assertAlmostEqual(report.imb_overlap(10.0, 10.0, 10.0), 1.0)   # perfect overlap
        self.assertAlmostEqual(report.imb_overlap(10.0, 10.0, 20.0), 0.0)   # none
        self.assertAlmostEqual(report.imb_overlap(10.0, 10.0, 15.0), 0.5)
        self.assertAlmostEqual(report.imb_overlap(10.0, 5.0, 12.0), 0.6)    # divided by min = 5
        self.assertEqual(report.imb_overlap(10.0, 10.0, 25.0), 0.0)          # clamped at 0
        self.assertEqual(report.imb_overlap(10.0, 10.0, 5.0), 1.0)           # clamped at 1
        self.assertEqual(report.imb_overlap(0.0, 10.0, 10.0), 0.0)

    def test_aggregate_on_sample_data(self):
        agg = report.aggregate(load("sample_results.json")["samples"])
        lat = agg[("pingpong", "latency_us")]
        self.assertEqual(lat["nmad"][8]["median"], 2.0)
        self.assertEqual((lat["nmad"][8]["min"], lat["nmad"][8]["max"]), (1.0, 3.0))
        self.assertAlmostEqual(lat["openmpi-vader"][8]["median"], 0.5)
        self.assertAlmostEqual(lat["mpich"][8]["median"], 0.95)
        self.assertEqual(lat["mpich"][8]["n"], 4)
        self.assertEqual(lat["nmad"][1048576]["median"], 100.0)
        bw = agg[("pingpong", "bw_MBps")]
        self.assertEqual(bw["mpich"][1048576]["median"], 6000.0)  # even count: mean of the middle two
        self.assertEqual(agg[("nbc_overlap.Iallreduce", "overlap_pct")]["openmpi-vader"][65536]["max"], 10.0)
        self.assertNotIn(("pingpong", "latency_us"), {k for k in agg if not agg[k]})

    def test_ratios_ours_over_peer(self):
        agg = report.aggregate(load("sample_results.json")["samples"])
        rt = report.ratios(agg[("pingpong", "latency_us")], ["nmad", "nmad-native-tcp"],
                           ["openmpi-vader", "mpich", "libfabric-shm"])
        self.assertAlmostEqual(rt[("nmad", "openmpi-vader")][8], 4.0)
        self.assertAlmostEqual(rt[("nmad", "openmpi-vader")][1048576], 0.5)
        self.assertAlmostEqual(rt[("nmad", "mpich")][8], 2.0 / 0.95)
        self.assertNotIn(1048576, rt[("nmad", "mpich")])  # mpich has no 1 MiB latency
        self.assertAlmostEqual(rt[("nmad-native-tcp", "libfabric-shm")][8], 5.0)
        bw = report.ratios(agg[("pingpong", "bw_MBps")], ["nmad"], ["openmpi-vader", "mpich"])
        self.assertAlmostEqual(bw[("nmad", "openmpi-vader")][1048576], 2.0)
        self.assertAlmostEqual(bw[("nmad", "mpich")][1048576], 10000.0 / 6000.0)
        ov = report.ratios(agg[("overlap", "overlap_pct")], ["nmad"], ["mpich"])
        self.assertAlmostEqual(ov[("nmad", "mpich")][1024], 3.0)
        # No ours -> no ratios; a zero peer median -> None rather than a crash.
        self.assertEqual(report.ratios(agg[("msgrate", "rate_Mmsgs")], [], ["mpich"]), {})
        zero = {"a": {1: {"median": 1.0}}, "b": {1: {"median": 0.0}}}
        self.assertIsNone(report.ratios(zero, ["a"], ["b"])[("a", "b")][1])


class MarkdownTest(unittest.TestCase):
    def setUp(self):
        self.data = load("sample_results.json")
        self.md = report.render_markdown(self.data, ["latency.png"])

    def test_tables_have_median_min_max_cells_per_configuration(self):
        md = self.md
        self.assertIn("Command: `bench/compare --quick --out /tmp/x`", md)
        # Configuration columns in the configuration order of the data.
        self.assertIn("| size | nmad | openmpi-vader | mpich | nmad-native-tcp | libfabric-shm |", md)
        self.assertIn("| 8 | 2.00 (1.00–3.00) | 0.500 (0.400–0.600) | 0.950 (0.800–1.20) | "
                      "5.00 (4.00–6.00) | 1.00 (1.00–1.00) |", md)
        self.assertIn("| 1M | 100.0 (90.00–110.0) | 200.0 (190.0–210.0) | – | – | – |", md)
        self.assertIn("| 1M | 10000 (9000–11000) | 5000 (5000–5000) | 6000 (4000–8000) |", md)
        self.assertIn("![latency](latency.png)", md)
        for title in ("Ping-pong latency", "Ping-pong bandwidth", "Streaming bandwidth, unidirectional",
                      "Message rate", "Isend/Irecv overlap", "Iallreduce overlap", "memcpy"):
            self.assertIn(title, md)

    def test_ratio_tables(self):
        md = self.md
        self.assertIn("Ratios ours / peer (< 1 is better)", md)
        self.assertIn("Ratios ours / peer (> 1 is better)", md)
        self.assertIn("nmad / openmpi-vader", md)
        self.assertIn("nmad-native-tcp / libfabric-shm", md)
        lat_ratio_row = [l for l in md.splitlines() if l.startswith("| 8 | 4.00× |")]
        self.assertEqual(len(lat_ratio_row), 1, md)
        self.assertIn("2.11×", lat_ratio_row[0])  # 2.0 / 0.95
        self.assertIn("| 1M | 2.00× | 1.67× |", md)  # bandwidth nmad/openmpi-vader, nmad/mpich
        self.assertIn("| 1K | 3.00× |", md)  # overlap nmad/mpich

    def test_skipped_failures_and_no_ours_banner(self):
        md = self.md
        self.assertIn("**openmpi-tcp** skipped: apt-get install openmpi-bin failed: E: no network", md)
        self.assertIn("failure: mpich / multiflow (rep 0): exit code 1: boom", md)
        self.assertIn("- a free-text note", md)
        self.assertNotIn("No nmad configuration produced data", md)
        # Without our data: the report still comes out, with the banner and no ratios.
        peers_only = copy.deepcopy(self.data)
        peers_only["samples"] = [s for s in peers_only["samples"] if not s["config"].startswith("nmad")]
        md2 = report.render_markdown(peers_only, [])
        self.assertIn("No nmad configuration produced data", md2)
        self.assertNotIn("Ratios ours / peer", md2)
        self.assertIn("| size | openmpi-vader | mpich | libfabric-shm |", md2)

    def test_headline(self):
        rows, header = report.headline(report.aggregate(self.data["samples"]), [c["name"] for c in self.data["configs"]])
        by = {r[0]: r for r in rows}
        self.assertEqual(header[1], "latency 8 B (µs)")
        self.assertEqual(by["nmad"][1], "2.00 (1.00–3.00)")
        self.assertEqual(by["nmad"][2], "10000 (9000–11000) @ 1M")
        self.assertEqual(by["nmad"][3], "10000 (9000–11000) @ 1M")
        self.assertEqual(by["nmad"][4], "12000 (11500–12500) @ 4M")
        self.assertEqual(by["mpich"][4], "6000 (6000–6000) @ 4M")
        self.assertEqual(by["libfabric-shm"][2:], ["–", "–", "–"])


class ParserTest(unittest.TestCase):
    def test_mpi_lines(self):
        lib, pts = report.parse_mpi_output(load("mpi_nbc_overlap.txt"))
        self.assertEqual(lib, "MPICH Version:\t4.0.2")
        self.assertEqual([p["bench"] for p in pts], ["nbc_overlap.Iallreduce", "nbc_overlap.Ibcast", "pingpong"])
        samples = report.points_to_samples(pts, "mpich", 2)
        ib = [s for s in samples if s["bench"] == "nbc_overlap.Ibcast" and s["metric"] == "overlap_pct"]
        self.assertEqual(ib, [dict(bench="nbc_overlap.Ibcast", metric="overlap_pct", config="mpich", size=1024,
                                   rep=2, value=36.83)])
        # The bandwidth of a 0-byte message is not kept, its latency is.
        pp = {s["metric"] for s in samples if s["bench"] == "pingpong"}
        self.assertEqual(pp, {"latency_us"})
        # The overlap percentage agrees with the IMB formula on the printed times.
        self.assertAlmostEqual(100 * report.imb_overlap(1.276, 1.241, 2.060), 36.83, places=1)

    def test_fi_pingpong_table(self):
        rows = report.parse_fi_pingpong(load("fi_pingpong_tcp.txt"))
        by = {r["size"]: r for r in rows}
        self.assertEqual(by[8], {"size": 8, "latency_us": 6.19, "bw_MBps": 1.29})
        self.assertEqual(by[1024]["latency_us"], 5.21)
        self.assertIn(int(1.5 * (1 << 20)), by)
        self.assertEqual(by[4 << 20]["bw_MBps"], 6013.54)
        self.assertEqual(by[0]["latency_us"], 16.24)

    def test_nmad_native_json(self):
        header, pts = report.parse_nmad_native(load("nmad_native.json", raw=True))
        self.assertEqual(header["driver"], "tcp")
        self.assertEqual([(p["size"], p["latency_us"]) for p in pts], [(8, 5.5), (1048576, 400.0)])
        self.assertAlmostEqual(pts[1]["bw_MBps"], 2621.44)
        self.assertEqual(pts[0]["raw"]["samples_us"], [5.0, 5.2, 5.8, 7.0])
        # Log lines around the object are tolerated.
        _, again = report.parse_nmad_native("nmad: starting\n" + load("nmad_native.json", raw=True) + "bye\n")
        self.assertEqual(len(again), 2)
        with self.assertRaises(ValueError):
            report.parse_nmad_native("not json at all")


class OutputTest(unittest.TestCase):
    @unittest.skipUnless(HAVE_MPL, "python3-matplotlib is not installed")
    def test_plots_are_png_files(self):
        with tempfile.TemporaryDirectory() as d:
            files = report.make_plots(load("sample_results.json"), d)
            self.assertEqual(files, ["latency.png", "bandwidth.png", "stream_bw.png", "msgrate.png", "overlap.png"])
            for f in files:
                with open(os.path.join(d, f), "rb") as fh:
                    self.assertEqual(fh.read(8), PNG_MAGIC, f)
                self.assertGreater(os.path.getsize(os.path.join(d, f)), 5000)

    @unittest.skipUnless(HAVE_MPL, "python3-matplotlib is not installed")
    def test_write_all_on_recorded_run(self):
        data = load("recorded_quick.json")
        with tempfile.TemporaryDirectory() as d:
            docs = os.path.join(d, "docs", "compare-latest.md")
            paths = report.write_all(data, d, docs)
            with open(paths["json"]) as f:
                again = json.load(f)
            self.assertEqual(len(again["samples"]), len(data["samples"]))
            with open(paths["markdown"]) as f:
                md = f.read()
            with open(docs) as f:
                docs_md = f.read()
            self.assertTrue(paths["plots"])
            for p in paths["plots"]:
                self.assertIn("(%s)" % os.path.basename(p), md)
                self.assertNotIn("(%s)" % os.path.basename(p), docs_md)
                self.assertIn("`%s`" % os.path.basename(p), docs_md)
            self.assertTrue(docs_md.startswith("# nmad vs Open MPI vs MPICH"))
            self.assertIn("Command: `bench/compare --quick", docs_md)
            # Every configuration that produced data is a column of the latency table.
            with_data = {s["config"] for s in data["samples"] if s["bench"] == "pingpong"}
            lat_header = [l for l in md.splitlines() if l.startswith("| size |")][0]
            for c in with_data:
                self.assertIn(" %s " % c, lat_header)
            # The recorded medians are what the tables show.
            agg = report.aggregate(data["samples"])
            st = agg[("pingpong", "latency_us")]["openmpi-vader"][8]
            self.assertIn(report.fmt_cell(st), md)

    def test_docs_markers_keep_hand_written_sections(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "BENCHMARKS.md")
            with open(path, "w") as f:
                f.write("# Mine\nintro\n%s\nold report\n%s\nafter\n" % (report.DOCS_BEGIN, report.DOCS_END))
            report.write_docs(path, "# new report\n")
            with open(path) as f:
                text = f.read()
            self.assertEqual(text, "# Mine\nintro\n%s\n# new report\n%s\nafter\n" % (report.DOCS_BEGIN, report.DOCS_END))
            fresh = os.path.join(d, "fresh.md")
            report.write_docs(fresh, "# only\n")
            with open(fresh) as f:
                self.assertEqual(f.read(), "# only\n")


class MeasureOrderTest(unittest.TestCase):
    """bench/compare rotates the configurations' order every repetition."""

    def test_order_rotates_every_repetition(self):
        import argparse
        import compare  # noqa: E402

        order = []

        class Fake:
            status = "ok"

            def __init__(self, name):
                self.name = name

            def supports(self, bench):
                return True

            def run(self, bench, params, rep, ctx):
                order.append((rep, self.name))
                return [], {"config": self.name}

        configs = [Fake("a"), Fake("b"), Fake("c")]
        args = argparse.Namespace(quick=True, sizes=None, iters=None)
        compare.measure_all(configs, ["pingpong"], args, 4, None)
        by_rep = [[n for r, n in order if r == rep] for rep in range(4)]
        self.assertEqual(by_rep, [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]])


if __name__ == "__main__":
    unittest.main()
