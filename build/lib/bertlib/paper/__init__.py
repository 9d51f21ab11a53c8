"""The equations, in numpy and torch, as the papers write them: attention (one softmax, one scale),
the numpy BERT, masked-LM corruption, the efficient variants and their plain twins, the
family. Imports only bertlib.checks and paper/ (the listed crossings in tests/test_architecture.py
aside).
"""
