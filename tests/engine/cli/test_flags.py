"""The flag types of the commands (engine/cli/flag_types.py) and engine.train's parser
(engine/cli/flags.py): each bad value is one argparse error that says what was wrong; good
values come back converted."""
import argparse

import pytest

from engine.cli.flag_types import (nonnegative_float, nonnegative_int, policies, positive_float, positive_int,
                                    size)
from engine.cli.flags import UsageError, parser


@pytest.mark.parametrize("fn,text,message", [
    (positive_int, "0", "must be positive, got 0"),
    (positive_int, "2.5", "'2.5' is not an integer"),
    (nonnegative_int, "-1", "must be 0 or more, got -1"),
    (positive_float, "-0.1", "must be a finite positive number, got '-0.1'"),
    (positive_float, "inf", "must be a finite positive number, got 'inf'"),
    (positive_float, "x", "'x' is not a number"),
    (nonnegative_float, "nan", "must be a non-negative number, got 'nan'"),
    (nonnegative_float, "inf", "must be a non-negative number, got 'inf'"),
    (size, "16GB", "binary units"),
    (policies, "ideal,magic", "unknown policy 'magic' (choose from ideal, odswap, swapadvisor, reference, window, lms"),
    (policies, ",", "unknown policy ','"),
])
def test_bad_values_say_what_was_wrong(fn, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        fn(text)
    assert message in str(e.value)


def test_good_values_are_converted():
    assert positive_int("3") == 3 and nonnegative_int("0") == 0
    assert positive_float("0.5") == 0.5 and nonnegative_float("0") == 0.0
    assert size("64MiB") == 64 << 20
    assert policies(" Ideal , swapadvisor ") == ["ideal", "swapadvisor"]


def test_the_parser_raises_usage_errors_instead_of_exiting():
    with pytest.raises(UsageError, match=r"--iterations: must be positive, got 0 \(see --help\)"):
        parser().parse_args(["--iterations", "0"])
    args = parser().parse_args([])
    assert (args.model, args.backend, args.memory, args.link_gbps) == ("small-cnn", "auto", None, None)
