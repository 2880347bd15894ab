"""nearpeak's optimization loop: proposers, the git ledger and the `nearpeak` command line."""
