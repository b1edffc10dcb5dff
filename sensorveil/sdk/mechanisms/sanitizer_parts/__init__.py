"""Sanitizer's parts: the alpha-beta-VAE and its training (model), the release and its measures (release),
and the choice of beta and the alphas on a validation split of the training rows (choice)."""
