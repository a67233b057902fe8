"""Stage 3: fine-tuning on GLUE and custom classification tasks; evaluate and predict."""
