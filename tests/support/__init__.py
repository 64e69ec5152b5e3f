"""What the tests share: fake servers on 127.0.0.1 (chat, embeddings, rerank, vision, QA),
the corpora they index, a browser, a `kohaku serve` process, free ports."""
