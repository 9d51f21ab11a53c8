"""The pretrained BERT through transformers (tiny/ builds its own model): loading it, its cached
runs, BERT's parameters as numpy, the AttentionInterface seam and ablation, the similarity
prior, corpus runs, head importance, fine-tuning.
"""
