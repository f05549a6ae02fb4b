// Scenario configuration: includes, overrides, typed reads, defaults and error messages.
#include <catch2/catch.hpp>

#include "platform/config/config.h"

#include <filesystem>
#include <functional>
#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;
using kelle::config;
using kelle::config_error;
using Catch::Matchers::Contains;

namespace {

// A fresh folder for the files of one test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() / ("kelle_cfg_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const config_error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("config: includes merge maps, the including file and -p override in that order", "[config]") {
  temp_dir d;
  d.write("base.yaml", "a:\n  x: 1\n  y: 2\nb: base\n");
  const std::string main = d.write("main.yaml", "include: base.yaml\na:\n  y: 3\n");
  config c = config::load(main, {"a.x=10"});
  auto a = c.root().child("a");
  CHECK(a.get_uint("x", 0, "n") == 10);
  CHECK(a.get_uint("y", 0, "n") == 3);
  CHECK(c.root().get_string("b", "", "s") == "base");
  CHECK(c.where("a.y") == main + ":3");
  CHECK(c.where("a.x") == "command line -p a.x=10");
  c.check_all_used();
}

TEST_CASE("config: defaults are recorded in the effective configuration", "[config]") {
  config c = config::from_string("s: {given: 2}\n");
  auto s = c.root().child("s");
  CHECK(s.get_double("given", 1.0, "x") == 2.0);
  CHECK(s.get_double("missing", 0.25, "x") == 0.25);
  CHECK(s.get_string("mode", "fast", "x") == "fast");
  CHECK(c.effective()["s"]["missing"].as<double>() == 0.25);
  CHECK(c.effective()["s"]["mode"].as<std::string>() == "fast");
}

TEST_CASE("config: an unknown key names its file, line, path and the keys expected there", "[config]") {
  temp_dir d;
  const std::string f = d.write("s.yaml", "mem:\n  banks: 4\n  bandwith_GBps: 10\n");
  config c = config::load(f);
  auto m = c.root().child("mem");
  m.get_uint("banks", 1, "banks");
  m.get_double("bandwidth_GBps", 1, "GB/s");
  const std::string e = error_of([&] { c.check_all_used(); });
  CHECK_THAT(e, Contains(f + ":3: unknown key 'mem.bandwith_GBps'"));
  CHECK_THAT(e, Contains("bandwidth_GBps"));
}

TEST_CASE("config: an unknown key near a valid one is named with it, before the key it leaves missing", "[config]") {
  // A transposition, a look-alike letter (Cyrillic o), a zero-width space: each the nearest valid key.
  config c = config::from_string("wrokload: 1\n", "t.yaml");
  auto root = c.root();
  CHECK(error_of([&] { root.child("workload"); }) ==
        "t.yaml:1: unknown key 'wrokload'; did you mean 'workload'? (workload: missing)");
  config c2 = config::from_string("\xd0\xbe: 1\nw\xd0\xberkload: {x: 1}\n", "u.yaml");
  CHECK(error_of([&] { c2.root().require_uint("workload", "a count"); }) ==
        "u.yaml:2: unknown key 'w\xd0\xberkload' (its '\xd0\xbe', U+043E, looks like 'o' and is not); did you mean "
        "'workload'? (workload: missing)");
  config c3 = config::from_string("ba\xe2\x80\x8btch: 1\n", "z.yaml");
  auto r3 = c3.root();
  r3.get_uint("batch", 1, "a count");
  CHECK_THAT(error_of([&] { c3.check_all_used(); }),
             Contains("unknown key 'ba\xe2\x80\x8btch' (it holds the invisible character U+200B); did you mean 'batch'?"));
  // Nothing near: the missing key is what is reported; a declared key is a candidate too.
  config c4 = config::from_string("foo: 1\nsytem: x\n", "v.yaml");
  auto r4 = c4.root();
  CHECK_THAT(error_of([&] { r4.child("tech"); }), Contains(": tech: missing; expected a map"));
  r4.declare({"system"});
  CHECK(error_of([&] { r4.child("tech"); }) == "v.yaml:2: unknown key 'sytem'; did you mean 'system'? (tech: missing)");
  // A key not read yet two edits from the missing one may be valid (read later): not named.
  config c5 = config::from_string("e: {silu: 1}\n", "w.yaml");
  CHECK_THAT(error_of([&] { c5.root().child("e").require_double("gelu", "an energy"); }),
             Contains("e.gelu: missing; expected an energy"));
}

TEST_CASE("config: a folder where a file is expected is refused as a folder", "[config]") {
  temp_dir d;
  d.write("sub/x.txt", "x");
  config c = config::from_string("f: " + (d.path / "sub").string() + "\n", "t.yaml");
  CHECK_THAT(error_of([&] { c.root().get_path("f", "", "a text file"); }),
             Contains("t.yaml:1: f: " + (d.path / "sub").string() + ": is a folder, expected a text file"));
}

TEST_CASE("config: YAML syntax errors say what was expected where", "[config]") {
  CHECK_THAT(error_of([] { config::from_string("a: {b: 1\n", "t.yaml"); }),
             Contains("t.yaml:2: YAML syntax error: expected ',' or '}' here (a flow map '{ ...' is not closed)"));
  CHECK_THAT(error_of([] { config::from_string("a: " + std::string(3000, '[') + std::string(3000, ']') + "\n", "t.yaml"); }),
             Contains("t.yaml:1: YAML syntax error: lists and maps nested too deep here"));
  CHECK_THAT(error_of([] { config::from_string("a: 1\n", "t.yaml", {"b=[1,"}); }),
             Contains("command line -p b=[1,: the value is not valid YAML: expected ',' or ']' here"));
}

TEST_CASE("config: wrong types, ranges and missing keys are errors with the key path", "[config]") {
  config c = config::from_string("m: {n: many, x: -3, list: [1, 2], flag: maybe}\n", "t.yaml");
  auto m = c.root().child("m");
  CHECK_THAT(error_of([&] { m.get_uint("n", 1, "a count"); }),
             Contains("t.yaml:1: m.n: expected a count (a whole number >= 0), got 'many'"));
  CHECK_THAT(error_of([&] { m.get_double("x", 1, "a latency in ns", 0.0); }),
             Contains("m.x: expected a latency in ns in [0, .inf], got -3"));
  CHECK_THAT(error_of([&] { m.get_double("list", 1, "a number"); }),
             Contains("m.list: expected a number, got a list"));
  CHECK_THAT(error_of([&] { m.get_bool("flag", true, "a switch"); }), Contains("m.flag: expected a switch"));
  CHECK_THAT(error_of([&] { m.require_double("absent", "the bandwidth in GB/s"); }),
             Contains("m.absent: missing; expected the bandwidth in GB/s"));
  CHECK_THAT(error_of([&] { m.get_choice("n", "a", {"a", "b"}); }),
             Contains("m.n: expected one of: a, b; got 'many'"));
  CHECK_THAT(error_of([&] { c.root().child("m").child("n"); }), Contains("m.n: expected a map, got a value"));
}

TEST_CASE("config: whole numbers accept hex and exponent notation but not fractions or negatives", "[config]") {
  config c = config::from_string("a: 0x400\nb: 1e6\nc: 1.5\nd: -1\n");
  auto r = c.root();
  CHECK(r.get_uint("a", 0, "n") == 1024);
  CHECK(r.get_uint("b", 0, "n") == 1000000);
  CHECK_THROWS_AS(r.get_uint("c", 0, "n"), config_error);
  CHECK_THROWS_AS(r.get_uint("d", 0, "n"), config_error);
}

TEST_CASE("config: include errors: missing file and cycles", "[config]") {
  temp_dir d;
  const std::string a = d.write("a.yaml", "include: b.yaml\n");
  d.write("b.yaml", "include: a.yaml\n");
  CHECK_THAT(error_of([&] { config::load(a); }), Contains("include cycle"));
  const std::string m = d.write("m.yaml", "x: 1\ninclude: [nothere.yaml]\n");
  CHECK_THAT(error_of([&] { config::load(m); }),
             Contains(m + ":2: include 'nothere.yaml': file not found"));
  CHECK_THAT(error_of([&] { config::load((d.path / "absent.yaml").string()); }),
             Contains("absent.yaml: cannot open the file"));
}

TEST_CASE("config: YAML syntax errors give the file and line", "[config]") {
  temp_dir d;
  const std::string f = d.write("bad.yaml", "a: 1\nb: [1, 2\n");
  CHECK_THAT(error_of([&] { config::load(f); }), Contains("bad.yaml:"));
  CHECK_THAT(error_of([&] { config::load(f); }), Contains("YAML syntax error"));
}

TEST_CASE("config: system names resolve to built-in system files, -p system= switches them", "[config]") {
  config c = config::from_string("system: kelle_edram\n");
  CHECK(c.root().child("system").get_string("name", "", "n") == "kelle_edram");
  config o = config::from_string("system: kelle_edram\n", "t.yaml", {"system=original_sram"});
  CHECK(o.root().child("system").get_string("name", "", "n") == "original_sram");
  CHECK_THAT(error_of([] { config::from_string("system: nosuch\n"); }),
             Contains("system: 'nosuch' is not a built-in system (expected one of:"));
}

TEST_CASE("config: overrides: bad syntax and setting below a value are errors", "[config]") {
  CHECK_THAT(error_of([] { config::from_string("a: 1\n", "t", {"a"}); }), Contains("expected key.path=value"));
  CHECK_THAT(error_of([] { config::from_string("a: 1\n", "t", {"a.b=2"}); }),
             Contains("cannot set 'a.b': 'a' is a value, not a map"));
  CHECK_THAT(error_of([] { config::from_string("a: 1\n", "t", {"a="}); }), Contains("the value is empty"));
  config c = config::from_string("a: 1\n", "t", {"new.deep.key=[1, 2]"});
  CHECK(c.effective()["new"]["deep"]["key"].size() == 2);
}

TEST_CASE("config: accept_unread skips an unread section but still checks a read one", "[config]") {
  config c = config::from_string("tech:\n  sram: {x: 1}\n  edram: {y: 2, typo: 3}\n");
  auto t = c.root().child("tech");
  t.child("edram").get_uint("y", 0, "n");
  c.accept_unread("tech.sram");
  c.accept_unread("tech.edram");
  CHECK_THAT(error_of([&] { c.check_all_used(); }), Contains("unknown key 'tech.edram.typo'"));
}

// --overlay (scenarios/tech/paper-implied.yaml, say): merged over the scenario and the files its
// system includes, before the -p overrides; its keys are named by the overlay's file and line.
TEST_CASE("config: an overlay replaces the system's and technology's keys, -p still wins", "[config]") {
  temp_dir d;
  d.write("tech.yaml", "tech:\n  dram: {pJ: 8, nJ: 1}\n");
  d.write("sys.yaml", "include: tech.yaml\nsystem:\n  name: s\n");
  const std::string main = d.write("main.yaml", "include: sys.yaml\nworkload: {n: 1}\n");
  const std::string over = d.write("over.yaml", "tech:\n  dram:\n    pJ: 23\n");
  config c = config::load(main, {"workload.n=2"}, {over});
  auto dram = c.root().child("tech").child("dram");
  CHECK(dram.get_double("pJ", 0, "x") == 23);
  CHECK(dram.get_double("nJ", 0, "x") == 1);
  CHECK(c.where("tech.dram.pJ") == over + ":3");
  CHECK(c.root().child("workload").get_uint("n", 0, "n") == 2);
  REQUIRE(c.overlays() == std::vector<std::string>{over});
  CHECK(c.with_overrides({"workload.n=3"}).overlays() == c.overlays());
  // -p over the overlay
  config p = config::load(main, {"tech.dram.pJ=5"}, {over});
  CHECK(p.root().child("tech").child("dram").get_double("pJ", 0, "x") == 5);
}

TEST_CASE("config: an overlay that names a system, is empty or is missing is refused in one line", "[config]") {
  temp_dir d;
  const std::string main = d.write("main.yaml", "workload: {n: 1}\n");
  const std::string sys = d.write("sys.yaml", "# a comment\nsystem: kelle_edram\n");
  CHECK_THAT(error_of([&] { config::load(main, {}, {sys}); }),
             Contains(sys + ":2: system: an overlay replaces keys of a scenario and names no system"));
  const std::string empty = d.write("empty.yaml", "# nothing\n");
  CHECK_THAT(error_of([&] { config::load(main, {}, {empty}); }),
             Contains("--overlay " + empty + ": the overlay is empty"));
  CHECK_THAT(error_of([&] { config::load(main, {}, {(d.path / "absent.yaml").string()}); }),
             Contains("absent.yaml"));
}
