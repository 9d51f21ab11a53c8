"""Everything that talks to transformers: loading the model, its cached runs, BERT's parameters as
numpy, the AttentionInterface seam and ablation, the similarity prior, corpus runs, head
importance, fine-tuning.
"""
