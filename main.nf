#!/usr/bin/env nextflow
/*
 * openpert's distributed engine.
 *
 * `openpert benchmark --engine nextflow` writes the plan (docs/plan_json.md) and runs
 *     nextflow run main.nf -params-file plan.json -profile <profile>
 * so the plan's top-level keys are `params.*`. Nothing here names a task or a component: the
 * datasets, the components, how their arguments are wired to files and their resources all come
 * from the plan.
 *
 *     datasets x methods     -> run_method -> predictions
 *     predictions x metrics  -> run_metric -> scores
 *
 * Every task runs `openpert run-component <config> --<arg> <file> ... --<param> <value> ...`, is
 * tagged with its job id (openpert reads the trace back by tag), takes cpus, memory and time from
 * its component's resource labels, and publishes its outputs to
 * <outdir>/outputs/<dataset_id>/<method_id>[/<metric_id>]/. A failed job is ignored so that the
 * rest of the benchmark goes on; the metrics of a failed method never run.
 */

// One word for bash, single-quoted.
def shellQuote(value) {
    "'" + value.toString().replace("'", "'\\''") + "'"
}

// cpus, memory and time of a component from its labels and params.resources; capped at
// params.max_cpus and params.max_memory_mb when given (the local executor refuses bigger tasks).
def resourcesOf(component) {
    def limits = [:]
    (component.labels ?: []).each { label -> limits.putAll(params.resources?.get(label) ?: [:]) }
    def cpus = limits.cpus
    def memoryMb = limits.memory_mb
    // (values given on the command line may arrive as strings)
    if (cpus != null && params.max_cpus)
        cpus = Math.min(cpus.toString().toInteger(), params.max_cpus.toString().toInteger())
    if (memoryMb != null && params.max_memory_mb)
        memoryMb = Math.min(memoryMb.toString().toLong(), params.max_memory_mb.toString().toLong())
    return [
        cpus: cpus,
        memory: memoryMb != null ? "${memoryMb} MB".toString() : null,
        time: limits.time_s != null ? "${limits.time_s}s".toString() : null,
    ]
}

// A job: the component, its file arguments in order, and where its outputs are published.
// Each input of format F comes from `upstream[F]` (a method's output) or else the dataset's files.
// Returns [job, files], files in the order of job.args.
def makeJob(id, dataset, methodId, component, upstream, publishDir) {
    def args = []
    def files = []
    (component.inputs ?: [:]).each { arg, format ->
        def source = upstream.containsKey(format) ? upstream[format] : dataset.files?.get(format)
        if (source == null)
            error("openpert: job ${id}: nothing of format '${format}' for --${arg} of ${component.config}")
        args << arg.toString()
        files << (source instanceof java.nio.file.Path ? source : file(source.toString(), checkIfExists: true))
    }
    def job = [
        id: id.toString(),
        dataset: dataset,
        method_id: methodId.toString(),
        component: component,
        args: args,
        publish_dir: publishDir.toString(),
    ] + resourcesOf(component)
    return [job, files]
}

// The `openpert run-component` command of a job; `staged` are its input files as staged in the
// task folder, in the order of job.args. Outputs are written under out/.
def componentCommand(job, staged) {
    def files = staged instanceof java.nio.file.Path ? [staged] : staged.collect { f -> f }
    if (files.size() != job.args.size())
        error("openpert: job ${job.id}: ${job.args.size()} file arguments but ${files.size()} files")
    def words = [params.openpert ?: 'openpert', 'run-component', shellQuote(job.component.config)]
    [job.args, files].transpose().each { arg, path -> words += ["--${arg}", shellQuote(path)] }
    (job.component.output_names ?: [:]).each { arg, name ->
        words += ["--${arg}", shellQuote("out/${name}")]
    }
    (job.component.params ?: [:]).each { name, value ->
        if (value != null) {
            // several values: Viash's default multiple separator
            def text = value instanceof Collection ? value.collect { v -> v.toString() }.join(';') : value.toString()
            words += ["--${name}", shellQuote(text)]
        }
    }
    return words.join(' ')
}

// A method's emitted outputs as format -> file.
def outputsByFormat(job, outs) {
    def files = outs instanceof java.nio.file.Path ? [outs] : outs.collect { f -> f }
    def byFormat = [:]
    (job.component.output_names ?: [:]).each { arg, name ->
        def found = files.find { f -> f.fileName.toString() == name }
        def format = job.component.outputs?.get(arg)
        if (found != null && format != null)
            byFormat[format.toString()] = found
    }
    return byFormat
}

process run_method {
    tag "${job.id}"
    errorStrategy 'ignore'
    cpus { job.cpus ?: 1 }
    memory { job.memory }
    time { job.time }
    container { job.component.container ?: params.container }
    publishDir "${params.outdir}/outputs/${job.publish_dir}", mode: params.publish_mode, overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), path(inputs, stageAs: 'in*/*')

    output:
    tuple val(job), path('out/*')

    script:
    """
    mkdir -p out
    ${componentCommand(job, inputs)}
    """
}

process run_metric {
    tag "${job.id}"
    errorStrategy 'ignore'
    cpus { job.cpus ?: 1 }
    memory { job.memory }
    time { job.time }
    container { job.component.container ?: params.container }
    publishDir "${params.outdir}/outputs/${job.publish_dir}", mode: params.publish_mode, overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), path(inputs, stageAs: 'in*/*')

    output:
    tuple val(job), path('out/*')

    script:
    """
    mkdir -p out
    ${componentCommand(job, inputs)}
    """
}

workflow {
    if (!params.outdir)
        error("openpert: the plan has no 'outdir'")
    if (!params.datasets || !params.methods)
        error("openpert: the plan needs 'datasets' and 'methods' (run with -params-file plan.json)")

    def datasets = channel.fromList(params.datasets)
    def methods = channel.fromList(params.methods)
    def metrics = channel.fromList(params.metrics ?: [])

    def method_jobs = datasets
        .combine(methods)
        .map { dataset, method ->
            def id = "${dataset.id}/${method.id}"
            makeJob(id, dataset, method.id, method, [:], id)
        }

    def predictions = run_method(method_jobs)
        .map { job, outs -> [job, outputsByFormat(job, outs)] }

    def metric_jobs = predictions
        .combine(metrics)
        .map { job, byFormat, metric ->
            def id = "${job.id}/${metric.id}"
            makeJob(id, job.dataset, job.method_id, metric, byFormat, id)
        }

    run_metric(metric_jobs)
}
