import sys

## VIASH START
par = {
    "de_test": "resources_test/perturbation_prediction/op3_synthetic/de_test.h5ad",
    "prediction": "resources_test/perturbation_prediction/op3_synthetic/prediction.h5ad",
    "de_test_layer": "clipped_sign_log10_pval",
    "output": "score.h5ad",
}
meta = {"name": "mean_rowwise_error", "resources_dir": "src/perturbation_prediction"}
## VIASH END

sys.path.append(meta["resources_dir"])
from perturbation_prediction_lib.de_files import aligned_truth_prediction  # noqa: E402
from perturbation_prediction_lib.rowwise_metrics import rowwise_errors, score_adata  # noqa: E402

# Per test row, the RMSE and MAE of the prediction over the genes of de_test; the scores are their means.
de_test, pred, truth, values = aligned_truth_prediction(par["de_test"], par["de_test_layer"], par["prediction"])
per_row = rowwise_errors(truth, values)
print(per_row.mean().to_string())
score_adata(per_row, de_test, pred).write_h5ad(par["output"], compression="gzip")
