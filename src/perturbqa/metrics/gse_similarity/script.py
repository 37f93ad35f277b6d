import anndata as ad
import pandas as pd

## VIASH START
par = {"input_solution": "resources_test/perturbqa/k562/solution.h5ad",
       "input_prediction": "resources_test/perturbqa/k562/prediction.h5ad", "output": "score.h5ad"}
meta = {"name": "gse_similarity"}
## VIASH END

METRICS = ["rouge1_recall", "embedding_cosine", "bertscore_precision", "bertscore_recall", "bertscore_f1"]
solution = ad.read_h5ad(par["input_solution"])
prediction = ad.read_h5ad(par["input_prediction"])
clusters = solution.obs[solution.obs["subtask"].isin(["gse_gene", "gse_pert"])]
texts = prediction.obs["text"].astype(object).reindex(clusters.index).fillna("").astype(str)
if len(clusters) == 0 or not texts.str.strip().any():
    reason = "no cluster items" if len(clusters) == 0 else "the prediction describes no cluster"
    print(f"gene-set metrics not applicable: {reason}")
    per_item = pd.DataFrame(columns=METRICS, dtype=float)
    values = [float("nan")] * len(METRICS)
else:
    from pertsci.text_metrics import bertscore, cosine_similarity_texts, rouge1_recall

    candidates = texts.tolist()
    references = clusters["annotation"].astype(str).tolist()
    precision, recall, f1 = bertscore(candidates, references)
    per_item = pd.DataFrame({
        "rouge1_recall": [rouge1_recall(c, r) for c, r in zip(candidates, references)],
        "embedding_cosine": cosine_similarity_texts(candidates, references),
        "bertscore_precision": precision, "bertscore_recall": recall, "bertscore_f1": f1,
    }, index=clusters.index)
    values = [float(per_item[m].mean()) for m in METRICS]
    print(per_item.mean().round(4).to_string())
per_item.index = per_item.index.astype(str)
uns = {"dataset_id": solution.uns["dataset_id"], "method_id": prediction.uns["method_id"],
       "metric_ids": METRICS, "metric_values": values}
ad.AnnData(obs=per_item, uns=uns).write_h5ad(par["output"])
