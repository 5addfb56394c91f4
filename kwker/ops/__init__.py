"""Fast implementations on arguments the dispatcher has already validated.

Nothing here checks user input: kwker.dispatch only calls these for plain
CPU tensors of a supported dtype with an in-range dim/k (kwker.support).
"""
