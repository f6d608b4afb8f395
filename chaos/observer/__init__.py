"""The observer role: the history of an experiment and the sampler that feeds it."""
