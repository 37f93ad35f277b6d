# Reference limma-voom run in R, for comparison with pertsci.edger, pertsci.limma_voom and pertsci.limma_ebayes.
# Usage: Rscript limma_voom_reference.R <dir>
# <dir> holds counts.csv (genes x samples, first column gene names), design.csv (samples x
# coefficients), contrasts.csv (coefficients x contrasts) and lowess.csv (x, y); results are
# written back into <dir>. The steps are those of the OP3 benchmark: TMM, voom, lmFit,
# contrasts.fit, eBayes(robust=TRUE).
suppressPackageStartupMessages({library(limma); library(edgeR)})
args <- commandArgs(trailingOnly = TRUE)
d <- args[1]
counts <- as.matrix(read.csv(file.path(d, "counts.csv"), row.names = 1, check.names = FALSE))
design <- as.matrix(read.csv(file.path(d, "design.csv"), row.names = 1, check.names = FALSE))
contrasts <- as.matrix(read.csv(file.path(d, "contrasts.csv"), row.names = 1, check.names = FALSE))
keep <- filterByExpr(DGEList(counts), design)
t0 <- Sys.time()
dge <- calcNormFactors(DGEList(counts))
v <- voom(dge, design)
fit <- lmFit(v, design)
eb <- eBayes(contrasts.fit(fit, contrasts), robust = TRUE)
elapsed <- as.numeric(difftime(Sys.time(), t0, units = "secs"))
write.csv(eb$coefficients, file.path(d, "r_logfc.csv"))
write.csv(eb$p.value, file.path(d, "r_pvalue.csv"))
write.csv(data.frame(norm_factors = dge$samples$norm.factors), file.path(d, "r_norm_factors.csv"))
write.csv(data.frame(keep = keep), file.path(d, "r_keep.csv"))
write.csv(data.frame(df_prior = eb$df.prior, s2_post = eb$s2.post), file.path(d, "r_ebayes.csv"))
write.csv(v$weights, file.path(d, "r_weights.csv"))
if (file.exists(file.path(d, "lowess.csv"))) {
  xy <- read.csv(file.path(d, "lowess.csv"))
  l <- lowess(xy$x, xy$y, f = 0.3)
  write.csv(data.frame(x = l$x, y = l$y), file.path(d, "r_lowess.csv"), row.names = FALSE)
}
writeLines(c(sprintf("s2_prior=%.17g", eb$s2.prior), sprintf("seconds=%.6f", elapsed)), file.path(d, "r_info.txt"))
