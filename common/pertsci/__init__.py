"""pertsci: perturbation science shared by two or more of openpert's tasks.

Differential expression (Wilcoxon rank-sum, limma-voom), normalisation, knowledge graphs, the OP3
simulation and its processing, language-model and embedding clients, and text metrics. It never
imports the harness (``openpert``) nor any task: every path it reads is passed in explicitly.
"""
