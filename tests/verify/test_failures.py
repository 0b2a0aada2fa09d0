"""Failing tests read from a lane's log: real pytest, unittest and cargo output
recorded from runs, jest, vitest and go output written in their formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge.verify.failures import MAX_FAILURES, Failure, describe, failures_from_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "failures"

PYTEST = [
    ("tests/test_calc.py::test_max_age", "assert 48 == 49"),
    ("tests/test_calc.py::test_add_strings", "AssertionError: assert 'ab' == 'ab '"),
    ("tests/test_calc.py::test_raises", "ValueError: bad value 42"),
    ("tests/test_calc.py::test_param[2]", "assert 2 == 1"),
    ("tests/test_time.py::TestClock::test_now", "AssertionError: clock went backwards"),
]
UNITTEST = [
    ("test_uni.CalcTest.test_error", "KeyError: 'missing'"),
    ("test_uni.CalcTest.test_add", "AssertionError: 2 != 3"),
]
JS = [
    "maxAge › counts hours",
    "maxAge › rejects negative days",
]
GO = [
    ("TestMaxAge", "calc_test.go:12: maxAge(2) = 48, want 49"),
    ("TestTable/negative", "calc_test.go:27: maxAge(-1) = -24, want an error"),
]
CARGO = {
    "tests::max_age_in_hours": "assertion `left == right` failed",
    "tests::parses": "not a number: ParseIntError { kind: InvalidDigit }",
}


def read(name: str) -> list[Failure]:
    return failures_from_log("unit", (FIXTURES / f"{name}.log").read_text(encoding="utf-8"))


def pairs(failures: list[Failure]) -> list[tuple[str, str]]:
    return [(f.test, f.message) for f in failures]


@pytest.mark.parametrize("name", ["pytest-default", "pytest-q", "pytest-rA", "pytest-tbshort"])
def test_pytest_names_each_failing_test_with_its_first_error_line(name: str) -> None:
    found = read(name)
    assert pairs(found) == PYTEST
    assert all(f.lane == "unit" for f in found)
    # The summary cuts the message at the terminal's width; the section's E line does not.
    assert "clock went backwards" in found[-1].message
    assert "time.time() < 0" in found[-1].excerpt


def test_pytest_with_line_tracebacks_and_collection_errors() -> None:
    assert pairs(read("pytest-tbline")) == [PYTEST[-1]]
    assert pairs(read("pytest-collect")) == [
        ("tests/test_imp.py", "ModuleNotFoundError: No module named 'nosuchmod'")
    ]


def test_pytest_sections_alone_name_the_tests() -> None:
    text = (FIXTURES / "pytest-q.log").read_text().split("short test summary")[0]
    assert [f.test for f in failures_from_log("unit", text)][:2] == [
        "test_max_age",
        "test_add_strings",
    ]


@pytest.mark.parametrize("name", ["unittest", "unittest-v"])
def test_unittest(name: str) -> None:
    found = read(name)
    assert pairs(found) == UNITTEST
    assert "self.assertEqual(1 + 1, 3)" in found[1].excerpt


def test_unittest_subtests_are_told_apart() -> None:
    assert pairs(read("unittest-subtest")) == [
        ("test_sub.SubTest.test_each (i=1)", "AssertionError: 1 not less than 1"),
        ("test_sub.SubTest.test_each (i=2)", "AssertionError: 2 not less than 1"),
    ]
    old = "FAIL: test_add (test_uni.CalcTest)\n" + "-" * 70 + "\nAssertionError: 2 != 3\n"
    assert pairs(failures_from_log("u", old)) == [
        ("test_uni.CalcTest.test_add", "AssertionError: 2 != 3")
    ]


def test_jest() -> None:
    found = read("jest")
    assert [f.test for f in found] == JS
    assert found[0].message == "expect(received).toBe(expected) // Object.is equality"
    assert found[1].message == "TypeError: Cannot read properties of undefined (reading 'days')"
    assert "Received: 48" in found[0].excerpt


def test_vitest() -> None:
    found = read("vitest")
    assert [f.test for f in found] == [f"src/time.test.ts > {t.replace(' ›', ' >')}" for t in JS]
    assert found[0].message == "AssertionError: expected 48 to be 49 // Object.is equality"


def test_jest_and_vitest_marks_alone() -> None:
    text = (
        "  maxAge\n    ✓ is zero (1 ms)\n    ✕ counts hours (4 ms)\n   × other 3ms\n     → boom\n"
    )
    assert pairs(failures_from_log("js", text)) == [("counts hours", ""), ("other", "boom")]


@pytest.mark.parametrize("name", ["go", "go-v"])
def test_go(name: str) -> None:
    assert pairs(read(name)) == GO  # a parent failing through its subtest names the subtest


def test_go_panic() -> None:
    [found] = read("go-panic")
    assert found.test == "TestParse"
    assert found.message.startswith("panic: runtime error: index out of range [3]")


@pytest.mark.parametrize("name", ["cargo", "cargo-backtrace"])
def test_cargo(name: str) -> None:
    found = read(name)
    assert dict(pairs(found)) == CARGO
    assert " left: 48" in next(f for f in found if f.test == "tests::max_age_in_hours").excerpt


def test_cargo_result_lines_alone() -> None:
    text = "test tests::a ... ok\ntest tests::b ... FAILED\n"
    assert pairs(failures_from_log("rs", text)) == [("tests::b", "")]


def test_a_log_in_no_runners_shape_gives_its_last_error_lines() -> None:
    found = read("plain")
    assert pairs(found) == [
        ("", "src/main.c:12:5: error: expected ; before } token"),
        ("", "make: *** [Makefile:8: main.o] Error 1"),
    ]
    assert failures_from_log("x", "all good\nforge: timed out after 3s\n") == []


def test_describe_names_the_first_and_counts_the_rest() -> None:
    found = read("pytest-q")
    assert describe(found) == "tests/test_calc.py::test_max_age (assert 48 == 49) and 4 more"
    assert describe(found[:1]) == "tests/test_calc.py::test_max_age (assert 48 == 49)"
    assert describe([]) == ""
    assert Failure("l", "", "boom").describe() == "boom"


def test_records_keep_lane_test_and_message() -> None:
    f = read("pytest-q")[0]
    assert f.to_dict() == {"lane": "unit", "test": f.test, "message": "assert 48 == 49"}
    assert Failure.from_dict(f.to_dict()) == f  # the excerpt is not part of the record


def test_limits_keep_a_record_small() -> None:
    many = "".join(f"FAILED tests/t.py::test_{n} - {'x' * 500}\n" for n in range(200))
    found = failures_from_log("unit", many)
    assert len(found) == MAX_FAILURES
    assert len(found[0].message) <= 200
    assert failures_from_log("unit", "\x1b[31mFAILED tests/t.py::test_a - boom\x1b[0m")[0].test == (
        "tests/t.py::test_a"
    )


def test_pytest_ids_with_spaces_keep_their_file_and_are_all_named() -> None:
    log = "\n".join(
        [
            "=========================== short test summary info ============================",
            "FAILED tests/test_number.py::test_naturalsize[test_args57-1 Byte] - AssertionError: x",
            "FAILED tests/test_number.py::test_naturalsize[test_args58-2 Bytes]",
            "ERROR tests/test_time.py::TestClock::test_skew[a b c] - RuntimeError: y",
            "========================= 2 failed, 1 error in 0.12s ==========================",
        ]
    )
    assert [(f.test, f.message) for f in failures_from_log("unit", log)] == [
        ("tests/test_number.py::test_naturalsize[test_args57-1 Byte]", "AssertionError: x"),
        ("tests/test_number.py::test_naturalsize[test_args58-2 Bytes]", ""),
        ("tests/test_time.py::TestClock::test_skew[a b c]", "RuntimeError: y"),
    ]
