"""Text around the model: the served model's tokenizer, input validation, prompt
building within the context window, and incremental detokenizing."""
