import sys

## VIASH START
par = {
    "de_test": "resources_test/perturbation_prediction/op3_synthetic/de_test.h5ad",
    "prediction": "resources_test/perturbation_prediction/op3_synthetic/prediction.h5ad",
    "de_test_layer": "clipped_sign_log10_pval",
    "output": "score.h5ad",
}
meta = {"name": "mean_rowwise_correlation", "resources_dir": "src/perturbation_prediction/utils"}
## VIASH END

sys.path.append(meta["resources_dir"])
import op3_utils as u  # noqa: E402

de_test, pred, truth, values = u.aligned_truth_prediction(par["de_test"], par["de_test_layer"], par["prediction"])
per_row = u.rowwise_correlations(truth, values)
print(per_row.mean().to_string())
u.score_adata(per_row, de_test, pred).write_h5ad(par["output"], compression="gzip")
