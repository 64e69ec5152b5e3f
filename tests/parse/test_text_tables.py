"""Tables recovered from extracted text, on tables as the WattBot corpus prints them (pypdf
text): each block becomes a table whose rows carry their column names, rather than lines
merged into the running paragraphs, where a model must count cells against a header 20 lines
up."""

from __future__ import annotations

from kohaku_rag.config_files import stable_hash
from kohaku_rag.document.table_record import TableRow, row_sentence
from kohaku_rag.document.tree import Attachment, NodeKind, ParsedDocument, ParsedSection, build_tree
from kohaku_rag.parse.payload import paragraphs_with_tables
from kohaku_rag.parse.sentences import split_sentences
from kohaku_rag.parse.text_tables import split_tables

PROSE = (
    "variation between image generation models, depending on the size of image that they generate, and on the\n"
    "number of denoising steps that each of the models carries out for every single image that it generates.\n"
)
# luccioni2024, Table 2: a two-row header (a group over "mean" and "std"), the caption after the table
CAPTION_AFTER = (
    PROSE + "inference energy (kWh)\n"
    "task mean std\n"
    "text classification 0.002 0.001\n"
    "extractive QA 0.003 0.001\n"
    "text generation 0.047 0.03\n"
    "image generation 2.907 3.31\n"
    "Table 2. Mean and standard deviation of energy per 1,000 queries for the ten tasks examined in our analysis.\n"
    "We can also observe that there is a large variation in the amount of energy used, from the least energy-intensive\n"
)


def only(text: str):  # noqa: ANN201
    tables = split_tables(text.splitlines())
    assert len(tables) == 1, tables
    return tables[0]


def test_a_caption_after_the_table_and_a_header_over_two_lines() -> None:
    table = only(CAPTION_AFTER)
    record = table.record
    assert record is not None and record.label == "Table 2"
    assert record.caption.startswith("Table 2. Mean and standard deviation")
    assert record.label_header == "task"
    assert record.columns == ("inference energy (kWh) · mean", "inference energy (kWh) · std")
    assert [(r.label, r.cells) for r in record.rows][2] == ("text generation", ("0.047", "0.03"))
    assert row_sentence(record, record.rows[2]) == (
        "Table 2 (Mean and standard deviation of energy per 1,000 queries for the ten tasks …)"
        " · text generation · inference energy (kWh) mean: 0.047 · std: 0.03"
    )


def test_a_caption_above_and_a_header_broken_over_many_lines() -> None:
    # li2025a, Table 3: each column's name on its own line, a citation under it
    text = (
        "Table 3: Carbon emissions of our proposed model, FLM-101B, and other well-known LLMs. For details, please see the\n"
        "corresponding references. The definitions of TDP, nettCO 2e, and their formulas are the same as (Patterson 2021).\n"
        "Model GPT-3\n(Brown et al. 2020)\nGopher\n(Rae et al. 2021)\nPaLM\n(Anil et al. 2023)\n"
        "Llama-2\n(Touvron et al. 2023b)FLM-101B\n"
        "Params 175B 280B 540B 70B 101B\n"
        "Energy (MkWh) 1171 1066 3179 688 40\n"
        "net tCO2e 552 380 271 291 26\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label == "Table 3" and record.caption.endswith("(Patterson 2021).")
    assert record.label_header == "Model"
    assert record.columns == ("GPT-3", "Gopher", "PaLM", "Llama-2", "FLM-101B")
    assert record.rows[2].label == "net tCO2e" and record.rows[2].cells[-1] == "26"


def test_a_header_stacked_one_word_a_line_and_rows_under_a_spanning_label() -> None:
    # morrison2025, Table 3: the header printed column by column; a model's three request
    # rates on three lines, its name on the first only; "258 bil." one cell
    header = (
        "Request\nfreq.\n(req / s)\nGPU\nPower\nUsage\n(kWh)\nCarbon\nEmissions\n(g CO2eq)\nSeconds\nper 100 req.\n"
    )
    rows = (
        "Llama 3.2 1B ∞ 0.003 1.0 1.38 258 bil.\n"
        "8 0.036 12.0 12.64 21.5 bil.\n"
        "1 0.160 53.1 100.58 4.83 bil.\n"
        "Qwen 2.5 7B ∞ 0.009 3.0 1.79 —\n"
        "8 0.053 17.6 12.77 —\n"
    )
    record = only(PROSE + header + "# Inf. for\nCO2 equiv.\n" + rows + PROSE).record
    assert record is not None
    assert record.columns[:3] == ("Request freq. (req / s)", "GPU Power Usage (kWh)", "Carbon Emissions (g CO2eq)")
    assert record.columns[-1] == "# Inf. for CO2 equiv."
    assert [r.label for r in record.rows] == [
        "Llama 3.2 1B",
        "Llama 3.2 1B",
        "Llama 3.2 1B",
        "Qwen 2.5 7B",
        "Qwen 2.5 7B",
    ]
    second = record.rows[1]
    assert second.cells[:2] == ("8", "0.036") and second.cells[-1] == "21.5 bil."
    assert record.rows[4].cells[-1] == ""  # "—": no value


def test_a_header_below_its_rows() -> None:
    text = PROSE + "A100 400 312\nH100 700 989\nV100 300 125\nGPU TDP (W) TFLOPS\n" + PROSE
    record = only(text).record
    assert record is not None and record.label_header == "GPU"
    assert record.columns == ("TDP (W)", "TFLOPS")
    assert record.rows[1].label == "H100" and record.rows[1].cells == ("700", "989")


def test_a_row_label_continued_on_a_second_line() -> None:
    text = PROSE + "Model Energy Hours\nBLOOMz\n7B 51.6 10\nFlan-T5 3.1 2\nOPT 7.7 5\n" + PROSE
    record = only(text).record
    assert record is not None and record.rows[0].label == "BLOOMz 7B"
    assert record.rows[0].cells == ("51.6", "10")


def test_a_cell_with_its_unit_and_one_letter_column_names() -> None:
    """A cell with its unit ("64.7 GB") is one cell, and one-letter column names ("L", "d",
    "G") are names, not a figure's axis (the shape of chen2024's Table 3)."""
    text = (
        PROSE + "Table 3: Large language models used for evaluation.\n"
        "Model Parameters L d G\n"
        "LLaMA-33B 64.7 GB 60 6656 1\n"
        "LLaMA-65B 130.1 GB 80 8192 1\n"
        "LLaMA3-70B 137.5 GB 80 8192 8\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == "Model"
    assert record.columns == ("Parameters", "L", "d", "G")
    assert record.rows[0] == TableRow(label="LLaMA-33B", cells=("64.7 GB", "60", "6656", "1"))


def test_a_first_name_that_reads_as_a_column_is_not_taken_for_the_labels() -> None:
    """chen2024, page 2: "TPU v6e" is one column's name, so four names over three cells do not
    make "H100" the row labels' name (which would shift every cell one column): not aligned,
    or (since a lowercase word joins the name before it) aligned under the three GPUs."""
    text = (
        PROSE
        + (
            "H100 H20 TPU v6e\nBF16 TFLOPs 989 148 918\nMemory capacity 80 GB 96 GB 32 GB\n"
            "Memory bandwidth 3.35 TB/s 4.0 TB/s 1.64 TB/s\n"
        )
        + PROSE
    )
    records = [t.record for t in split_tables(text.splitlines())]
    assert records in ([], [None]) or (
        len(records) == 1
        and records[0] is not None
        and records[0].label_header == ""
        and records[0].columns == ("H100", "H20", "TPU v6e")
        and records[0].rows[0].cells == ("989", "148", "918")
    )


def test_a_table_that_cannot_be_aligned_stays_in_the_running_text() -> None:
    # li2025a, Table 2: eight names spread over two header lines for eight cells, in a way no
    # count can split: kept as text, never aligned by guess
    text = (
        "Table 2: Parallel strategies and throughput for different growth stages.\n"
        "Params Tensor Pipeline Data Number Batch teraFLOP/s FLOPs\n"
        "(billion) Parallel Size Parallel Size Parallel Size of GPUs Size per GPU Utilization\n"
        "16 2 1 96 192 2304 162 51.90%\n51 4 2 24 192 2304 160 51.30%\n101 4 4 12 192 2160 165 52.88%\n" + PROSE
    )
    table = only(text)
    assert table.record is None
    assert (
        table.text().splitlines()[0].startswith("Table 2: Parallel")
        and "101 4 4 12 192 2160 165 52.88%" in table.text()
    )
    # Its lines stay in the running text, as without records: set apart as a block of raw
    # lines it would crowd the passage that answers out of the context (and a misread table
    # answers "52.88%" as the row above's "51.30%")).
    paras = paragraphs_with_tables(text)
    assert not any(p.attachment is Attachment.TABLE for p in paras)
    assert [p.text for p in paras] == [p.text for p in paragraphs_with_tables(text, tables=False)]


def test_prose_with_numbers_is_not_a_table() -> None:
    text = PROSE * 3 + "In 2019 the total was 12.5 and in 2020 it was 14.0 for the same region overall.\n" + PROSE
    assert split_tables(text.splitlines()) == []


def test_a_table_in_the_tree_is_a_paragraph_with_a_node_per_row() -> None:
    paras = paragraphs_with_tables(CAPTION_AFTER, page=6)
    doc = ParsedDocument("luccioni2024", "Power Hungry Processing", [ParsedSection("Results", paras, page=6)])
    nodes = build_tree(doc, split_sentences)
    table = next(n for n in nodes if n.kind is NodeKind.PARAGRAPH and n.attachment is Attachment.TABLE)
    assert table.text.splitlines()[0].startswith("Table 2. Mean and standard deviation")
    assert "text generation · inference energy (kWh) mean: 0.047 · std: 0.03" in table.text.splitlines()
    rows = [n for n in nodes if n.parent_id == table.node_id]
    assert rows[0].text.startswith("Table 2. Mean")  # the caption, then one node per row
    assert rows[3].node_id == f"{table.node_id}:s4" and "text generation" in rows[3].text
    assert rows[3].text.startswith("Table 2 (Mean and standard deviation")
    # the prose around it stays prose
    assert any(n.attachment is Attachment.TEXT and "denoising steps" in n.text for n in nodes)


def test_a_cited_row_names_the_column_its_value_came_from() -> None:
    from kohaku_rag.answering.prediction import Prediction
    from kohaku_rag.answers.records import Answer
    from kohaku_rag.retrieval.context import ContextItem

    record = only(CAPTION_AFTER).record
    assert record is not None
    from kohaku_rag.document.table_record import table_text

    item = ContextItem(
        "luccioni2024", "luccioni2024:sec1:p2", "paragraph", 6, 1.0, table_text(record), "table", table=record
    )
    answer = Answer(answer="0.03 kWh", answer_value="0.03", answer_unit="kWh", ref_id=("luccioni2024",),
                    explanation="", is_blank=False, supporting_materials="")  # fmt: skip
    pred = Prediction("q1", 0, 0, answer, 1, 1, 0, 0, 0, 0.0, 1, 0, context=(item,))
    assert pred.cited_cells() == ["Table 2 · text generation · inference energy (kWh) · std"]
    assert pred.as_row()["cited_cells"] == ["Table 2 · text generation · inference energy (kWh) · std"]


def test_without_table_records_the_lines_stay_in_the_running_text() -> None:
    """`table_records = false`: the text parses as before this issue, under the parse hash a
    lake had before it (records are the default since 2026-11-28, and a default lake re-parses
    once)."""
    from kohaku_rag.indexing.index_config import IndexConfig

    assert IndexConfig().table_records is True
    text_only = IndexConfig(table_records=False)
    assert text_only.parse_hash == stable_hash({"use_outline": True}) != IndexConfig().parse_hash
    paras = paragraphs_with_tables(CAPTION_AFTER, tables=False)
    assert all(p.attachment is Attachment.TEXT and p.table is None for p in paras)
    assert any("text generation 0.047 0.03" in p.text for p in paras)


def test_a_tree_holding_a_table_keeps_its_checksum(tmp_path) -> None:  # noqa: ANN001
    """A tree with a table column keeps its content checksum through a Parquet round trip,
    though the bytes under a null struct slot (every node that is not a table) differ."""
    from kohaku_rag.document.tree import nodes_to_table
    from kohaku_rag.lake.tables import content_problem, write_parquet_atomic

    paras = paragraphs_with_tables(CAPTION_AFTER, page=6)
    doc = ParsedDocument("luccioni2024", "Power Hungry Processing", [ParsedSection("Results", paras, page=6)])
    path = tmp_path / "tree.parquet"
    write_parquet_atomic(nodes_to_table(build_tree(doc, split_sentences)), path)
    assert content_problem(path) is None


def test_a_range_is_one_cell() -> None:
    # "35–65%", "$433–$1472": a range of two numbers is one cell, not the end of a label
    text = PROSE + "Class Count Share Cost\nNano 1 35–65% $433–$1472\nMicro 2 50–80% $942–$3,201\n" + PROSE
    record = only(text).record
    assert record is not None and record.columns == ("Count", "Share", "Cost")
    assert record.rows[0] == TableRow(label="Nano", cells=("1", "35–65%", "$433–$1472"))


def test_an_interval_in_brackets_stays_with_its_value_and_a_citation_leaves_the_label() -> None:
    # "2.4 [2.0, 2.9]": an interval around the value before it is that value's cell; "8B [23, 80]":
    # numbers in brackets that do not bracket the value before them are a citation
    intervals = (
        PROSE + "Approach Growth R2\nCloud 2.4 [2.0, 2.9] 0.58\nOwned 9 [8, 12] 0.77\nRented 3.0 [2.4, 3.7] 0.66\n"
    )
    record = only(intervals + PROSE).record
    assert record is not None and record.rows[1] == TableRow(label="Owned", cells=("9[8,12]", "0.77"))
    cited = (
        PROSE + "Model TP Energy Time\nQwen 3 8B [23, 80] 1 9713.7 12.5\nPhi 4 15B [3] 1 19974.4 20.1\n"
        "Qwen 3 32B [80] 2 26419.7 30.2\n" + PROSE
    )
    record = only(cited).record
    assert record is not None and record.label_header == "Model"
    assert record.rows[0] == TableRow(label="Qwen 3 8B", cells=("1", "9713.7", "12.5"))


def test_a_header_ending_in_an_abbreviation_is_a_header() -> None:
    # "Renew." and "Nuc." end the line with a full stop: names cut short, not a sentence's end
    text = (
        "a line of a footnote that runs quite long: https://example.org/abc\n"
        "Consumer Renew. Gas Coal Nuc.\nChina 22% 3% 65% 4%\nGermany 40% 7% 38% 13%\nGoogle 56% 14% 15% 10%\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == "Consumer"
    assert record.columns == ("Renew.", "Gas", "Coal", "Nuc.")


def test_a_section_heading_above_the_header_is_not_a_column() -> None:
    text = (
        PROSE + "6 Evaluation\nLLaMA2 DeepseekMoE Gemma JetMoE\n# Total Params 7B 16B 2B 8B\n"
        "ARC-challenge 53.1 53.2 48.4 48.7\nMMLU 46.9 46.3 41.8 49.2\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.columns == ("LLaMA2", "DeepseekMoE", "Gemma", "JetMoE")
    assert record.rows[2] == TableRow(label="MMLU", cells=("46.9", "46.3", "41.8", "49.2"))


def test_a_parenthesised_size_after_a_label_word_is_the_labels() -> None:
    # "Llama (13B)": the size names the model; the row's cells start after it
    text = (
        PROSE + "Model Cost Average ARC\nLlama-2 (13B) 201.37 ( ±28.77) 58.66 59.39\n"
        "Llama (7B) 49.54 ( ±7.08) 49.72 51.02\nGLM-130B 210.80 48.11 42.15\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == "Model"
    assert record.columns == ("Cost", "Average", "ARC")
    assert record.rows[1] == TableRow(label="Llama (7B)", cells=("49.54(±7.08)", "49.72", "51.02"))


def test_a_name_of_words_and_signs_or_a_lowercase_qualifier_is_one_column() -> None:
    # "PyTorch % ∆": signs belong to the name before them; "TPU v2": a lowercase word qualifies it
    signs = PROSE + "Dataset PyTorch % ∆ vLLM % ∆\nBurstGPT 506.52% 63.75%\nAzure Code 102.79% 26.59%\n" + PROSE
    record = only(signs).record
    assert record is not None and record.label_header == "Dataset"
    assert record.columns == ("PyTorch % ∆", "vLLM % ∆")
    qualified = (
        PROSE + "H100 TPU v1 TPU v2 TPU v3\nDate adjustment factor 1.00 10.66 5.38 3.90\n"
        "Performance ratio to H100 100% 5% 9% 12%\n" + PROSE
    )
    record = only(qualified).record
    assert record is not None and record.columns == ("H100", "TPU v1", "TPU v2", "TPU v3")
    assert record.rows[0].cells[2] == "5.38"


def test_a_line_of_values_with_a_word_cell_is_not_taken_for_a_label() -> None:
    # "Power rating 700 W 400 W unlisted": a row whose last cell is a word, not the first part of
    # the next row's label: kept as text rather than glued onto "Inter-chip bandwidth"
    text = (
        PROSE + "H100 H20 TPU\nBF16 TFLOPs 989 148 918\nMemory capacity 80 GB 96 GB 32 GB\n"
        "Power rating 700 W 400 W unlisted\nInter-chip bandwidth 450 GB/s 450 GB/s 448 GB/s\n" + PROSE
    )
    assert [t.record for t in split_tables(text.splitlines())] in ([], [None])


def test_a_label_name_over_rows_without_labels_is_a_columns_name() -> None:
    # li2025a, Table 6: the first name ("Parameters") is the first cell column's, as no row has a
    # label: reading it as the labels' name shifted every cell one column (kept as text)
    text = (
        PROSE + "Parameters Training Data Average ARC\n16B 245.37B 39.19 32.25\n51B 39.64B 41.79 35.32\n"
        "101B 26.54B 44.41 39.76\n" + PROSE
    )
    assert [t.record for t in split_tables(text.splitlines())] in ([], [None])


def test_a_stacked_header_whose_pieces_hold_a_boundary_is_not_cut() -> None:
    # jegham2025, Table 2: "(A100) Unon-GPU total" ends one name and starts the next on one line
    header = "Class GPU\nCount\nDGPU\n(H100)\nDGPU\n(A100)\nUGPU total\n(H100)\nUGPU total\n(A100) Unon-GPU total\n"
    rows = "Nano 1 35–65% 80–90% 0.55–1.00% 1.25–1.5% 0.87%\nMicro 1 50–80% 90–100% 0.75–1.25% 1.5–1.6% 0.87%\n"
    assert [t.record for t in split_tables((PROSE + header + rows + PROSE).splitlines())] in ([], [None])


def test_a_stacked_header_whose_first_piece_may_name_the_labels_is_not_guessed() -> None:
    # amazon2023: "Region" may name the labels, and then where the next names start is a tie:
    # read without it, "Region" was glued onto the first column's name
    header = "Region\nAverage\nPackaging\nWeight\nper Shipment\n(g/shipment)\nMetric Tons\nof Packaging\nMaterial\nEliminated\n"
    rows = "Europe 96 34,817\nU.S. and Canada 111 33,529\nIndia 112 9,910\n"
    assert [t.record for t in split_tables((PROSE + header + rows + PROSE).splitlines())] in ([], [None])


def test_names_of_several_words_are_read_off_one_header_line_only() -> None:
    # patterson2021: lower-case words joined across header lines below a block read as names
    text = (
        PROSE + "model 11 2.6 619\nPercent activated 100% 100% 0.25%\nDeveloper Google OpenAI\n"
        "Datacenter of original experiment Google\nGeorgia\n" + PROSE
    )
    assert all(t.record is None for t in split_tables(text.splitlines()))


def test_a_footnote_with_a_link_above_the_header_is_not_part_of_it() -> None:
    text = (
        PROSE + "3\n2nvidia-smi: https://bit.ly/30sGEbi\nModel Power Hours\n"
        "Transformer 1415.78 12\nELMo 517.66 336\nBERT 12041.51 79\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == "Model" and record.columns == ("Power", "Hours")


def test_numbered_columns_after_a_label_name_of_several_words() -> None:
    # "Carbon Intensity 2019 2020 2021 YoY%": years name the columns (an increasing run of whole
    # numbers), the words before them the row labels
    text = (
        PROSE + "Emissions Category 2019 2020 2021 YoY%\nFossil fuels 5.57 9.37 11.89 8%\n"
        "Refrigerants 0.19 0.25 0.22 -25%\nTotal 5.76 9.62 12.11 7%\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == "Emissions Category"
    assert record.columns == ("2019", "2020", "2021", "YoY%")
    assert record.rows[1].cells == ("0.19", "0.25", "0.22", "-25%")


def test_a_line_of_numbered_columns_under_their_group_name() -> None:
    # chung2025, Table 1: "4 8 16 32 64" reads as a row, but it is the header's second line:
    # the batch sizes under "Max batch size", after a column "TP" and the labels' "Model"
    text = (
        PROSE + "Model TP Max batch size\n4 8 16 32 64\nQwen 3 8B [23, 80] 1 9713.7 6010.1 4314.9 3340.8 2770.8\n"
        "Phi 4 15B [3] 1 19974.4 12389.6 9347.3 7634.9 7595.4\nQwen 3 32B [80] 2 26419.7 15168.3 9140.5 6165.5 4520.6\n"
        + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == "Model"
    assert record.columns[:2] == ("TP", "Max batch size · 4") and record.columns[-1] == "Max batch size · 64"
    assert record.rows[1] == TableRow(
        label="Phi 4 15B", cells=("1", "19974.4", "12389.6", "9347.3", "7634.9", "7595.4")
    )


def test_a_date_is_one_cell() -> None:
    text = (
        PROSE + "H100 TPU v1 TPU v2\nRelease date 2022-09-21 2015-05-20 2017\nDate adjustment factor 1.00 10.66 5.38\n"
        "Performance ratio 100% 5% 9%\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.rows[0] == TableRow(
        label="Release date", cells=("2022-09-21", "2015-05-20", "2017")
    )


def test_a_figure_axis_glued_onto_its_title_is_not_a_header() -> None:
    text = PROSE + "0\n200\n400\n600Time in Seconds\n1.27 1.00\n0.88 0.66\n0.51 0.40\n" + PROSE
    assert all(t.record is None for t in split_tables(text.splitlines()))


def test_a_row_of_codes_with_digits_over_the_number_rows_is_a_row() -> None:
    # dodge2022, Table 2: "GPU 4·V100 8·V100 256·A100" names a row of text cells, each with a
    # digit, one per column: a row, not a third header line
    text = (
        PROSE + "Model BERT BERT 6B\nfinetune pretrain Transf.\nGPU 4·V100 8·V100 256·A100\n"
        "Hours 6 36 192\nkWh 3.1 37.3 13,812.4\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == "Model"
    assert record.columns == ("BERT finetune", "BERT pretrain", "6B Transf.")
    assert [r.label for r in record.rows] == ["GPU", "Hours", "kWh"]
    assert record.rows[0].cells == ("4·V100", "8·V100", "256·A100") and record.rows[2].cells[1] == "37.3"


def test_a_first_column_of_numbers_named_before_a_group() -> None:
    # han2024, Table 5: "Year" names the years' column, the rest of its line the group over
    # "NOx SO2 PM2.5 VOC"; the rows have no label but their first cell, the year, names them
    text = (
        PROSE + "Year Electricity Generation Emission(Metric Ton)\nNOx SO2 PM2.5 VOC\n"
        "2016 1100575.41 1369417.44 111604.62 30250.76\n2023 711746.94 717409.25 110878.22 34311.54\n"
        "2028 695495.34 733437.11 110279.40 34446.71\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == "Year"
    assert record.columns[1] == "Electricity Generation Emission(Metric Ton) · SO2"
    assert record.rows[1] == TableRow(label="2023", cells=("711746.94", "717409.25", "110878.22", "34311.54"))


def test_units_under_names_are_no_group() -> None:
    # griggs2024, Table 3: "($/hr) Savings" completes the names above it, they are no group under
    # "Solver L4 A10G ...": and the instance counts leave cells out, so no reading is safe
    text = (
        PROSE + "Rate (req/s) Solver L4 A10G A100 H100 Norm. Cost\n($/hr) Savings\n1 Mélange 1 1 1.71 N/A\n"
        "H100-only 1 7.516 77.25%\nA100-only 1 3.67 53.41%\nL4-only 3 2.1 18.57%\n" + PROSE
    )
    assert all(t.record is None for t in split_tables(text.splitlines()))


def test_names_repeated_under_one_group_word_each() -> None:
    # zschache2025: "news yelp" over "Energy (Wh) Accuracy Energy (Wh) Accuracy": each dataset
    # over its own pair, not one group over all four ("Dataset" titles the datasets)
    text = (
        PROSE + "Dataset news yelp\nModel Energy (Wh) Accuracy Energy (Wh) Accuracy\n"
        "Linear BoW <0.01 0.59 <0.01 0.36\nXGBoost Tf-idf <0.01 0.55 <0.01 0.33\nPhi Mini 7.20 0.87 5.13 0.53\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == "Model"
    assert record.columns == (
        "Dataset news · Energy (Wh)",
        "Dataset news · Accuracy",
        "Dataset yelp · Energy (Wh)",
        "Dataset yelp · Accuracy",
    )


def test_a_sentence_below_the_rows_is_not_their_header() -> None:
    # amazon2023: a sentence's first line below the rows read as four names
    text = (
        PROSE + "Signatories 300 396 473\nCountries 29 36 42\nIndustries 51 55 59\n"
        "Accelerating Forest finance (LEAF) Coalition—a public-private\ninitiative that is mobilizing more than $1 billion to protect forests\n"
    )
    assert all(t.record is None for t in split_tables(text.splitlines()))


def test_a_legend_below_rows_without_labels_is_not_their_header() -> None:
    # erben2023: a bar chart's values, then its legend ("Model" / "RN18" / "RN50")
    text = (
        PROSE + "0\n500\n1000Samples per Second\n1466 1462 1462\n768 771 778\n292 298 297\nModel\nRN18\nRN50\n" + PROSE
    )
    assert all(t.record is None for t in split_tables(text.splitlines()))


def test_numbered_columns_under_a_title() -> None:
    # amazon2023: a title line over "2021 2022 2023 YoY%": the title groups the numbered columns
    text = (
        PROSE + "The Climate Pledge by the Numbers\n2021 2022 2023 YoY%\nSignatories 300 396 473 19%\n"
        "Countries 29 36 42 17%\nIndustries 51 55 59 7%\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.columns[0] == "The Climate Pledge by the Numbers · 2021"
    assert record.columns[-1].endswith("YoY%") and record.rows[1].cells == ("29", "36", "42", "17%")


def test_a_table_label_and_a_title_in_capitals_are_not_header_lines_and_a_glued_unit_is_a_cell() -> None:
    # xia2024, TABLE IV: "TABLE IV" alone (no colon) and a title in capitals above the names;
    # "48GB" is a cell like "48 GB"
    text = (
        PROSE + "TABLE IV\nESTIMATED COST OF FINE -TUNING MIXTRAL ON GS WITH SPARSE MOE\n"
        "GPU Mem MBS Throughput Cost ($/hr) Cost ($)\nA40 48GB 4 1.01 0.79 32.7\nA100 80GB 17 2.74 1.67 25.4\n"
        "H100 80GB 17 4.90 2.1 17.9\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == "GPU"
    assert record.columns == ("Mem", "MBS", "Throughput", "Cost ($/hr)", "Cost ($)")
    assert record.rows[1] == TableRow(label="A100", cells=("80GB", "17", "2.74", "1.67", "25.4"))


def test_the_next_tables_label_below_the_rows_is_not_their_header() -> None:
    # xia2024: "TABLE II" and its title under TABLE I's rows, read as their group
    text = (
        PROSE
        + "Mixtral 23.35 32 8\nBlackMamba 5.6 18 8\nOLMoE 7.1 16 8\nTABLE II\nDATASETS\n#queries seq len type\n"
        + PROSE
    )
    assert all(t.record is None for t in split_tables(text.splitlines()))


def test_a_charts_axis_is_not_a_table() -> None:
    # chung2025: a figure's sub-caption and axis ticks: "0 200 400 600 800 1000" is no row
    # whose label is "0 200 400 600", and "Batch" / "size" no header
    text = PROSE + "A100 H100\n(a) Llama 3.1 8B\n0 200 400 600 800 1000\nBatch size\n" + PROSE
    assert all(t.record is None for t in split_tables(text.splitlines()))


def test_a_legend_below_rows_labelled_by_numbers_alone_is_not_their_header() -> None:
    # erben2023: a chart's values, one of them read as the next row's label ("305")
    text = PROSE + "1257\n1401\n451\n551 626\n305 383 430\nModel\nRBase\nRLrg\nRXLM (d) NLP 2xA10\n" + PROSE
    assert all(t.record is None for t in split_tables(text.splitlines()))


def test_a_caption_tail_of_clauses_above_the_header_is_not_part_of_it() -> None:
    # zschache2025: the end of a caption ("..., single node, shown are averages over 10 runs")
    text = (
        PROSE + "yelp datasets, Capella system, single node, shown are averages\nDataset news yelp\n"
        "Model Energy (Wh) Accuracy Energy (Wh) Accuracy\nLinear BoW <0.01 0.59 <0.01 0.36\n"
        "XGBoost Tf-idf <0.01 0.55 <0.01 0.33\nPhi Mini 7.20 0.87 5.13 0.53\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.columns[2] == "Dataset yelp · Energy (Wh)"


def test_a_row_label_of_clauses_is_wrapped_text() -> None:
    # patterson2021: "Measured System Average Power including" / "memory, network interface, fans,
    # host CPU (Watts) 296 271 229 227": a label wrapped over two lines, not a header over a row
    text = (
        PROSE
        + "Measured System Average Power including\nmemory, network interface, fans, host CPU (Watts) 296 271 229 227\n"
        "Measured Performance (TFLOPS/s) 5 6.7 4.7 28.8 24.0\nEnergy consumption (KWh) 316 221 185 40\n" + PROSE
    )
    assert all(t.record is None for t in split_tables(text.splitlines()))


def test_a_table_of_one_value_a_row_beside_its_caption() -> None:
    # strubell2019, Table 1: one number a row; lines ending in one number are a table only
    # with their caption beside them
    rows = (
        "Consumption CO 2e (lbs)\nAir travel, 1 passenger, NY ↔SF 1984\nHuman life, avg, 1 year 11,023\n"
        "Car, avg incl. fuel, 1 lifetime 126,000\nTraining one model (GPU)\nTransformer (big) 192\n"
        "w/ neural architecture search 626,155\n"
    )
    record = only(PROSE + rows + "Table 1: Estimated CO 2 emissions from training common NLP models.\n" + PROSE).record
    assert record is not None and record.label == "Table 1" and record.label_header == "Consumption"
    assert record.columns == ("CO 2e (lbs)",)
    assert record.rows[0] == TableRow(label="Air travel, 1 passenger, NY ↔SF", cells=("1984",))
    assert any(r.label.endswith("Transformer (big)") and r.cells == ("192",) for r in record.rows)
    assert all(t.record is None for t in split_tables((PROSE + rows + PROSE).splitlines()))


def test_prose_lines_of_a_narrow_column_above_a_header_are_not_part_of_it() -> None:
    # strubell2019: two-column text, short lines; "and hyperparameters. Whereas a decade" holds a
    # sentence's end and the next one's start
    text = (
        "training to experiment with model architectures\nand hyperparameters. Whereas a decade ago most\n"
        "Model Power Hours\nTransformer 1415.78 12\nELMo 517.66 336\nBERT 12041.51 79\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == "Model" and record.columns == ("Power", "Hours")


def test_names_of_several_words_under_a_group_line() -> None:
    # strubell2019, Table 4: "Estimated cost (USD)" over "Models Hours Cloud compute Electricity"
    text = (
        PROSE + "Estimated cost (USD)\nModels Hours Cloud compute Electricity\n1 120 $52–$175 $5\n"
        "24 2880 $1238–$4205 $118\n4789 239,942 $103k–$350k $9870\n" + PROSE
    )
    record = only(text).record
    assert record is not None and record.label_header == ""
    assert record.columns[2] == "Estimated cost (USD) · Cloud compute"
    assert record.rows[1].cells == ("24", "2880", "$1238–$4205", "$118")
