"""bench.fig9_search's measures of Figure 9's claims, on histories whose answer is known."""
import math

from bench.fig9_search import converged_at, mapping_counts, shown_generations
from ga.history import GenerationStats


def history(bests, means):
    return [GenerationStats(0.0, g, b, m, 2 * m, 0, 10 * (g + 1)) for g, (b, m) in enumerate(zip(bests, means))]


def test_converged_is_the_first_evaluation_after_which_a_curve_stays_within_5_percent_of_its_end():
    h = history([10.0, 6.0, 5.2, 5.0, 5.0], [12.0, 5.0, 7.0, 5.2, 5.1])
    assert converged_at(h, "best") == 30          # 5.2 is within 5% of 5.0; 6.0 is not
    assert converged_at(h, "mean") == 40          # 5.0 was close, but 7.0 came after it
    assert converged_at(history([math.inf], [math.inf]), "best") is None


def test_generations_shown_double_and_end_at_the_last():
    assert shown_generations(10) == [0, 1, 2, 4, 8, 10]
    assert shown_generations(0) == [0]


def test_the_search_spaces_are_the_paper_s_2_to_the_n_and_every_grouping():
    restricted, unrestricted = mapping_counts(4)
    assert round(10**restricted) == 8 and round(10**unrestricted) == 15     # 2^3 runs; Bell(4) groupings
