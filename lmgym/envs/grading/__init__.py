"""Answer grading internals: exact plain-number comparison (in-process), the CPU-bounded worker
process, and the LaTeX/sympy comparison that runs only inside that worker.

The public entry point is :func:`lmgym.envs.answers.answers_equal`.
"""
