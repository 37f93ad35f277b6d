"""Engines that run a benchmark's plan: the local engine and Nextflow."""
