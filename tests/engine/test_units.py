import pytest

from engine.units import format_bytes, parse_bytes


@pytest.mark.parametrize("text,value", [("64MiB", 64 * 2**20), ("16GiB", 16 * 2**30), ("1.5KiB", 1536),
                                        ("512", 512), ("2 mib", 2 * 2**20), ("7B", 7)])
def test_parse(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text,hint", [("16GB", "16GiB"), ("abc", "not a size"), ("", "not a size"),
                                       ("-3MiB", "not a size"), ("0MiB", "positive"), ("5 parsecs", "binary units")])
def test_parse_rejects_with_a_hint(text, hint):
    with pytest.raises(ValueError, match=hint):
        parse_bytes(text)


def test_format():
    assert format_bytes(512) == "512 B"
    assert format_bytes(int(3.1 * 2**20)) == "3.1 MiB"
    assert format_bytes(180 * 2**30) == "180.0 GiB"


@pytest.mark.parametrize("n", [14592, 1025, 2**20 - 1, 3 * 2**30 + 1, 7 * 2**40 + 5, 999_999_999])
def test_a_printed_size_typed_back_is_never_smaller(n):
    """'the smallest budget that runs this model is 14.2 KiB' was itself refused (14592 B)."""
    printed = format_bytes(n)
    assert parse_bytes(printed.replace(" ", "")) >= n, printed
    assert format_bytes(14592) == "14.3 KiB" and format_bytes(2**20 - 1) == "1.0 MiB"


def test_a_column_of_sizes_reads_in_the_unit_its_largest_fits_rounded_up_as_format_bytes():
    from engine.units import format_in, unit_that_fits
    assert unit_that_fits(0) == ("B", 1) and unit_that_fits(1023) == ("B", 1)
    assert unit_that_fits(int(89456.1 * 2**20)) == ("GiB", 2**30)         # was printed as 'MiB 89456.1'
    assert unit_that_fits(1023 * 2**20) == ("MiB", 2**20) and unit_that_fits(2**50) == ("TiB", 2**40)
    gib = unit_that_fits(2**30)
    assert format_in(int(89456.1 * 2**20), gib) == "87.4" and format_in(0, gib) == "0.0"
    assert format_in(2**30 + 1, gib) + " GiB" == format_bytes(2**30 + 1) == "1.1 GiB"
    assert format_in(700, ("B", 1)) == "700"
