"""Plan a small LSTM under a tight memory budget with three policies, train each plan on the
CPU backend, and check every one ends bit-identical to the unlimited numpy run.

    python docs/examples/plan_and_train.py   (from the project's root)
"""
from engine import api as se


def main(iterations: int = 5) -> None:
    g = se.model("small-lstm", batch=4, size=3)
    reference = se.train(g, None, iterations=iterations)
    print(f"{g.name}: loss {reference.losses[0]:.3f} -> {reference.losses[-1]:.3f} over {iterations} iterations")
    for name in ("ideal", "odswap", "swapadvisor"):
        p = se.plan(g, name, memory="16KiB", profile="v100")   # ideal ignores the budget
        run = se.train(g, p, iterations=iterations, sanitize=True)
        same = se.identical(run, reference)
        print(f"{name:12s} simulated {p.seconds * 1e3:.3f} ms/iter on a V100, swaps in {p.h2d_bytes} B, "
              f"measured {run.seconds_per_iteration * 1e3:.1f} ms/iter here; identical: {same}")
        assert same, name


if __name__ == "__main__":
    main()
