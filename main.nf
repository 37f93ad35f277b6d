#!/usr/bin/env nextflow
/*
 * openpert's distributed engine: a whole benchmark (datasets, methods, metrics) as one workflow.
 *
 * `openpert benchmark --engine nextflow` writes the plan's jobs (docs/plan_json.md) and runs
 *     nextflow run main.nf -params-file nextflow_plan.json -profile <profile>
 * so `params.jobs` is the list of jobs, each fully expanded by openpert: its inputs (a file, or an
 * output of the job it follows, `after`), its container, component folder and code digest, where
 * it publishes, and for each attempt its cpus, memory, time, disk and task script. Nothing here
 * names a task or a component, and nothing is derived: this file only says how a job runs.
 *
 *     build jobs                           -> run_build
 *     dataset jobs, once their build (if any) -> run_dataset
 *     method jobs, once their dataset      -> run_method (run_llm_method)
 *     metric jobs, once their prediction   -> run_metric (run_llm_metric)
 *
 * A task stages its component's folder as `component/` and its inputs as `in<i>/<name>`, which its
 * script reads as "$1", "$2", ... in the order of the job's `stage_in`. It is tagged with its job id
 * (openpert reads the trace back by tag), is retried with its next attempt's limits when killed for
 * memory (137) or time (143), and is otherwise ignored when it fails, so that the rest of the
 * benchmark goes on.
 */

// A job's attempt: the last one planned serves any later retry Nextflow makes.
def attempt(job, n) {
    return job.attempts[Math.min(n as int, job.attempts.size()) - 1]
}

// The staged input files as words for bash (`set --`), each single-quoted.
def words(files) {
    def staged = files instanceof java.nio.file.Path ? [files] : files.collect { f -> f }
    return staged.collect { f -> "'" + f.toString().replace("'", "'\\''") + "'" }.join(' ')
}

// The jobs of a stage, each once the job it follows has handed over its outputs ("<job id>:<argument>"
// -> file), as [job, digest, component folder, inputs in staging order, what it hands on].
def ready(all, stage, handed) {
    def jobs = all.findAll { j -> j.stage == stage }
    def free = channel.fromList(jobs.findAll { j -> !j.after }).map { j -> [j, [:]] }
    def waiting = channel.fromList(jobs.findAll { j -> j.after }).map { j -> [j.after, j] }
    return free
        .mix(handed.combine(waiting, by: 0).map { id, files, j -> [j, files] })
        .filter { j, files -> j.stage_in.every { s -> s.file || files.containsKey("${s.job}:${s.output}".toString()) } }
        .map { j, files ->
            def inputs = j.stage_in.collect { s -> s.file ? file(s.file, checkIfExists: true) : files["${s.job}:${s.output}".toString()] }
            [j, j.digest, file(j.bundle, checkIfExists: true), inputs, files]
        }
}

// What a finished job hands to the jobs that follow it: what it was handed, and its own outputs.
def handedOn(job, outs, files) {
    def written = outs instanceof java.nio.file.Path ? [outs] : outs.collect { f -> f }
    def mine = job.outputs.collectEntries { arg, name -> ["${job.id}:${arg}".toString(), written.find { f -> f.name == name }] }
    return [job.id, files + mine.findAll { k, v -> v != null }]
}

process run_build {
    label 'openpert'
    label 'openpert_build'
    tag "${job.id}"
    container { job.container }
    cpus { attempt(job, task.attempt).cpus }
    accelerator { job.gpus }
    memory { attempt(job, task.attempt).memory }
    time { attempt(job, task.attempt).time }
    disk { attempt(job, task.attempt).disk }
    errorStrategy { task.exitStatus in [137, 143] && task.attempt < job.attempts.size() ? 'retry' : 'ignore' }
    publishDir "${job.publish_dir}", mode: 'copy', overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*'), val(files)

    output:
    tuple val(job), path('out/*'), val(files)

    script:
    """
    set -- ${words(inputs)}
    ${attempt(job, task.attempt).script}
    """
}

process run_dataset {
    label 'openpert'
    label 'openpert_dataset'
    tag "${job.id}"
    container { job.container }
    cpus { attempt(job, task.attempt).cpus }
    accelerator { job.gpus }
    memory { attempt(job, task.attempt).memory }
    time { attempt(job, task.attempt).time }
    disk { attempt(job, task.attempt).disk }
    errorStrategy { task.exitStatus in [137, 143] && task.attempt < job.attempts.size() ? 'retry' : 'ignore' }
    publishDir "${job.publish_dir}", mode: 'copy', overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*'), val(files)

    output:
    tuple val(job), path('out/*'), val(files)

    script:
    """
    set -- ${words(inputs)}
    ${attempt(job, task.attempt).script}
    """
}

process run_method {
    label 'openpert'
    label 'openpert_method'
    tag "${job.id}"
    container { job.container }
    cpus { attempt(job, task.attempt).cpus }
    accelerator { job.gpus }
    memory { attempt(job, task.attempt).memory }
    time { attempt(job, task.attempt).time }
    disk { attempt(job, task.attempt).disk }
    errorStrategy { task.exitStatus in [137, 143] && task.attempt < job.attempts.size() ? 'retry' : 'ignore' }
    publishDir "${job.publish_dir}", mode: 'copy', overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*'), val(files)

    output:
    tuple val(job), path('out/*'), val(files)

    script:
    """
    set -- ${words(inputs)}
    ${attempt(job, task.attempt).script}
    """
}

process run_metric {
    label 'openpert'
    label 'openpert_metric'
    tag "${job.id}"
    container { job.container }
    cpus { attempt(job, task.attempt).cpus }
    accelerator { job.gpus }
    memory { attempt(job, task.attempt).memory }
    time { attempt(job, task.attempt).time }
    disk { attempt(job, task.attempt).disk }
    errorStrategy { task.exitStatus in [137, 143] && task.attempt < job.attempts.size() ? 'retry' : 'ignore' }
    publishDir "${job.publish_dir}", mode: 'copy', overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*'), val(files)

    output:
    tuple val(job), path('out/*'), val(files)

    script:
    """
    set -- ${words(inputs)}
    ${attempt(job, task.attempt).script}
    """
}

// Components that talk to a language model: the same, with the API key as a Nextflow secret
// (`nextflow secrets set OPENPERT_LLM_API_KEY ...`), which no other job receives (docs/llm.md).
process run_llm_method {
    label 'openpert'
    label 'openpert_method'
    label 'openpert_llm'
    secret 'OPENPERT_LLM_API_KEY'
    tag "${job.id}"
    container { job.container }
    cpus { attempt(job, task.attempt).cpus }
    accelerator { job.gpus }
    memory { attempt(job, task.attempt).memory }
    time { attempt(job, task.attempt).time }
    disk { attempt(job, task.attempt).disk }
    errorStrategy { task.exitStatus in [137, 143] && task.attempt < job.attempts.size() ? 'retry' : 'ignore' }
    publishDir "${job.publish_dir}", mode: 'copy', overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*'), val(files)

    output:
    tuple val(job), path('out/*'), val(files)

    script:
    """
    set -- ${words(inputs)}
    ${attempt(job, task.attempt).script}
    """
}

process run_llm_metric {
    label 'openpert'
    label 'openpert_metric'
    label 'openpert_llm'
    secret 'OPENPERT_LLM_API_KEY'
    tag "${job.id}"
    container { job.container }
    cpus { attempt(job, task.attempt).cpus }
    accelerator { job.gpus }
    memory { attempt(job, task.attempt).memory }
    time { attempt(job, task.attempt).time }
    disk { attempt(job, task.attempt).disk }
    errorStrategy { task.exitStatus in [137, 143] && task.attempt < job.attempts.size() ? 'retry' : 'ignore' }
    publishDir "${job.publish_dir}", mode: 'copy', overwrite: true, saveAs: { name -> name.tokenize('/').last() }

    input:
    tuple val(job), val(digest), path(component, stageAs: 'component'), path(inputs, stageAs: 'in*/*'), val(files)

    output:
    tuple val(job), path('out/*'), val(files)

    script:
    """
    set -- ${words(inputs)}
    ${attempt(job, task.attempt).script}
    """
}

workflow {
    if (!params.jobs)
        error("openpert: the plan has no 'jobs' (run with -params-file nextflow_plan.json)")
    // GPUs are asked for only where the profile's executor schedules them (awsbatch, k8s)
    def gpus = params.gpu_accelerator.toString().toBoolean()
    def jobs = params.jobs.collect { j -> j + [gpus: gpus ? j.gpus : null] }

    def built = run_build(ready(jobs, 'build', channel.empty()))
        .map { job, outs, files -> handedOn(job, outs, files) }
    def made = run_dataset(ready(jobs, 'dataset', built))
        .map { job, outs, files -> handedOn(job, outs, files) }
    def methods = ready(jobs, 'method', made).branch { item ->
        llm: item[0].needs_llm
        plain: true
    }
    def predictions = run_method(methods.plain)
        .mix(run_llm_method(methods.llm))
        .map { job, outs, files -> handedOn(job, outs, files) }
    def metrics = ready(jobs, 'metric', predictions).branch { item ->
        llm: item[0].needs_llm
        plain: true
    }
    run_metric(metrics.plain)
    run_llm_metric(metrics.llm)
}
