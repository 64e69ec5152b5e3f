"""The document model: a parsed document as a tree (document, section, paragraph, sentence;
figures and tables as paragraphs), and a table's rows and columns as a record."""
