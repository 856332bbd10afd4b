"""How much failure a fabric design endures: rates, closed forms, Monte Carlo, job interruptions, plots."""
