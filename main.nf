#!/usr/bin/env nextflow
/*
 * openpert's distributed engine: a whole benchmark (datasets, methods, metrics) as one workflow.
 *
 * `openpert benchmark --engine nextflow` writes the plan (docs/plan_json.md) and runs
 *     nextflow run main.nf -params-file plan.json -profile <profile>
 * so the plan's top-level keys are `params.*`. Nothing here names a task or a component: the
 * datasets, the components, their images, code digests and how their arguments are wired to files
 * all come from the plan; the jobs themselves are built by lib/OpenpertJobs.groovy, which the
 * tests run under plain Groovy.
 *
 *     dataset_jobs            -> run_dataset -> datasets (with the plan's ready-made datasets)
 *     datasets x methods      -> run_method  -> predictions (one job per seed of a seeded control)
 *     predictions x metrics   -> run_metric  -> scores, as each prediction arrives
 *
 * Every task runs in its component's image (`container`), with the component's folder staged as
 * an input (`component/`: its config, resources, task library and the project's pertsci), so no
 * worker needs the repository; the component's code digest is an input, so that `-resume` re-runs
 * exactly the jobs whose code changed. A task runs
 *     openpert run-component --work-dir run ... component/<config> --<arg> <file> ... --<param> <value>
 * every word quoted, with its temporary files inside its own work folder. It is tagged with its
 * job id (openpert reads the trace back by tag), takes cpus, memory, time and disk from its component's
 * resource labels, is retried bigger when killed for memory (137) or time (143), and is otherwise
 * ignored when it fails, so that the rest of the benchmark goes on.
 */

// Staged files as a list: a single file arrives as a Path, several as a list (in a task's script,
// a BlankSeparatedList, which is not a Collection in every Nextflow version but iterates).
def asList(files) {
    return files instanceof java.nio.file.Path ? [files] : files.collect { f -> f }
}

// A plan path (or s3://, gs://, ... URI) as a file, or a staged file as it is.
def asFile(source) {
    return source instanceof java.nio.file.Path ? source : file(source.toString(), checkIfExists: true)
}

// [job, files] as a process takes it: the job prepared, its code digest, its component folder.
def staged(pair, options) {
    def job = OpenpertJobs.prepare(pair[0], options)
    if (!job.component.bundle)
        error("openpert: job ${job.id}: the plan gives no component folder (bundle) for ${job.component.config}")
    return [job, job.component.digest, file(job.component.bundle, checkIfExists: true), pair[1].collect { s -> asFile(s) }]
}

// The process directives of a job on its attempt.
def memoryOf(job, attempt) {
    def mb = OpenpertJobs.attemptLimits(job, attempt).memory_mb
    return mb != null ? "${mb} MB".toString() : null
}

def timeOf(job, attempt) {
    def seconds = OpenpertJobs.attemptLimits(job, attempt).time_s
    // a minute more than the job's own limit, so that openpert stops it first and says why
    return seconds != null ? "${seconds + 60}s".toString() : null
}

def diskOf(job, attempt) {
    def mb = OpenpertJobs.attemptLimits(job, attempt).disk_mb
    return mb != null ? "${mb} MB".toString() : null
}

def retryOrIgnore(job, exitStatus, attempt) {
    return exitStatus in [137, 143] && attempt <= job.max_retries ? 'retry' : 'ignore'
}

process run_dataset {
    tag "${job.id}"
    label 'openpert'
    label 'openpert_dataset'
    container { job.container }
    cpus { OpenpertJobs.attemptLimits(job, task.attempt).cpus ?: 1 }
    accelerator { job.gpus }
    memory { memoryOf(job, task.attempt) }
    time { timeOf(job, task.attempt) }
    disk { diskOf(job, task.attempt) }
    errorStrategy { retryOrIgnore(job, task.exitStatus, task.attempt) }
    publishDir "${job.publish_path}", mode: 'copy', overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*')

    output:
    tuple val(job), path('out/*')

    script:
    """
    ${OpenpertJobs.taskScript(job, asList(inputs), task.attempt)}
    """
}

process run_method {
    tag "${job.id}"
    label 'openpert'
    label 'openpert_method'
    container { job.container }
    cpus { OpenpertJobs.attemptLimits(job, task.attempt).cpus ?: 1 }
    accelerator { job.gpus }
    memory { memoryOf(job, task.attempt) }
    time { timeOf(job, task.attempt) }
    disk { diskOf(job, task.attempt) }
    errorStrategy { retryOrIgnore(job, task.exitStatus, task.attempt) }
    publishDir "${job.publish_path}", mode: 'copy', overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*')

    output:
    tuple val(job), path('out/*')

    script:
    """
    ${OpenpertJobs.taskScript(job, asList(inputs), task.attempt)}
    """
}

process run_metric {
    tag "${job.id}"
    label 'openpert'
    label 'openpert_metric'
    container { job.container }
    cpus { OpenpertJobs.attemptLimits(job, task.attempt).cpus ?: 1 }
    accelerator { job.gpus }
    memory { memoryOf(job, task.attempt) }
    time { timeOf(job, task.attempt) }
    disk { diskOf(job, task.attempt) }
    errorStrategy { retryOrIgnore(job, task.exitStatus, task.attempt) }
    publishDir "${job.publish_path}", mode: 'copy', overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*')

    output:
    tuple val(job), path('out/*')

    script:
    """
    ${OpenpertJobs.taskScript(job, asList(inputs), task.attempt)}
    """
}

// Components that talk to a language model: the same, with the API key as a Nextflow secret
// (`nextflow secrets set OPENPERT_LLM_API_KEY ...`), which no other job receives, and in
// the `llm` base image when params.llm_image names it (vLLM in process on a GPU; docs/llm.md).
process run_llm_method {
    tag "${job.id}"
    label 'openpert'
    label 'openpert_method'
    label 'openpert_llm'
    secret 'OPENPERT_LLM_API_KEY'
    container { job.container }
    cpus { OpenpertJobs.attemptLimits(job, task.attempt).cpus ?: 1 }
    accelerator { job.gpus }
    memory { memoryOf(job, task.attempt) }
    time { timeOf(job, task.attempt) }
    disk { diskOf(job, task.attempt) }
    errorStrategy { retryOrIgnore(job, task.exitStatus, task.attempt) }
    publishDir "${job.publish_path}", mode: 'copy', overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*')

    output:
    tuple val(job), path('out/*')

    script:
    """
    ${OpenpertJobs.taskScript(job, asList(inputs), task.attempt)}
    """
}

process run_llm_metric {
    tag "${job.id}"
    label 'openpert'
    label 'openpert_metric'
    label 'openpert_llm'
    secret 'OPENPERT_LLM_API_KEY'
    container { job.container }
    cpus { OpenpertJobs.attemptLimits(job, task.attempt).cpus ?: 1 }
    accelerator { job.gpus }
    memory { memoryOf(job, task.attempt) }
    time { timeOf(job, task.attempt) }
    disk { diskOf(job, task.attempt) }
    errorStrategy { retryOrIgnore(job, task.exitStatus, task.attempt) }
    publishDir "${job.publish_path}", mode: 'copy', overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*')

    output:
    tuple val(job), path('out/*')

    script:
    """
    ${OpenpertJobs.taskScript(job, asList(inputs), task.attempt)}
    """
}

workflow {
    if (!params.outdir)
        error("openpert: the plan has no 'outdir'")
    if (!params.methods || !params.metrics || !(params.datasets || params.dataset_jobs))
        error("openpert: the plan needs 'methods', 'metrics' and 'datasets' or 'dataset_jobs' (run with -params-file plan.json)")

    def options = [
        outdir: params.outdir,
        resources: params.resources,
        max_cpus: params.max_cpus,
        max_memory_mb: params.max_memory_mb,
        image_tag: params.image_tag,
        openpert: params.openpert,
        sandbox: params.sandbox,
        max_retries: params.max_retries,
        llm: [llm_base_url: params.llm_base_url, llm_model: params.llm_model, llm_backend: params.llm_backend],
        llm_image: params.llm_image,
        gpu_accelerator: params.gpu_accelerator,
    ]

    def loader_jobs = channel.fromList(params.dataset_jobs ?: [])
        .map { entry -> staged(OpenpertJobs.datasetJob(entry, params.shared_data_argument, params.shared_data), options) }
    def made = run_dataset(loader_jobs)
        .map { job, outs -> [id: job.dataset_id, files: OpenpertJobs.outputsByFormat(job, asList(outs))] }
    def datasets = channel.fromList(params.datasets ?: []).mix(made)

    def method_jobs = datasets
        .combine(channel.fromList(params.methods))
        .flatMap { dataset, method -> OpenpertJobs.methodJobs(dataset, method) }
        .map { pair -> staged(pair, options) }
        .branch { item ->
            llm: item[0].component.needs_llm
            plain: true
        }
    def predictions = run_method(method_jobs.plain)
        .mix(run_llm_method(method_jobs.llm))
        .map { job, outs -> [job, OpenpertJobs.outputsByFormat(job, asList(outs))] }

    def metric_jobs = predictions
        .combine(channel.fromList(params.metrics))
        .map { job, byFormat, metric -> staged(OpenpertJobs.metricJob(job, byFormat, metric), options) }
        .branch { item ->
            llm: item[0].component.needs_llm
            plain: true
        }
    run_metric(metric_jobs.plain)
    run_llm_metric(metric_jobs.llm)
}
