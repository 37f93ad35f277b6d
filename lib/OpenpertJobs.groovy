/*
 * The jobs of openpert's distributed engine (main.nf), as plain functions of the plan.
 *
 * Nextflow puts lib/ on the class path of main.nf, so main.nf calls these as OpenpertJobs.<name>;
 * the tests run the same functions with plain Groovy (tests/harness/engines/test_nextflow_groovy.py).
 * Nothing here touches Nextflow: values in, values out. Files are opaque objects (a path string of
 * the plan, or a staged Path): they are carried, never opened.
 *
 * Maps of the plan (a component's inputs, outputs and params) are read in the order of their keys,
 * never in the order the map keeps: Nextflow reads the plan with Groovy's JsonSlurper, whose maps
 * do not keep the file's order in every Groovy version, and the task script (which -resume hashes)
 * must not depend on it.
 *
 * A job is a map:
 *     id          <dataset>/<method>[@seed<k>][/<metric>], or datasets/<dataset> for a loader
 *     stage       dataset, method or metric
 *     dataset     the dataset ([id:, files: format -> file]); absent for a dataset job
 *     dataset_id, method_id, seed
 *     component   the plan's entry of the component (config, inputs, outputs, image, digest, ...)
 *     args        the file arguments, in the order of the job's input files
 *     params      parameter name -> value
 *     publish_dir where its outputs are published, under the results folder
 */
class OpenpertJobs {

    /** One word for bash: single-quoted, each ' written as '\'' (nothing inside is expanded). */
    static String shellQuote(Object value) {
        if (value == null)
            throw new IllegalArgumentException('openpert: a null word cannot be put in a command')
        return "'" + value.toString().replace("'", "'\\''") + "'"
    }

    /** An integer of the plan or of the command line (where every value arrives as a string). */
    static Long asLong(Object value) {
        if (value == null || value.toString().trim() == '')
            return null
        return new BigDecimal(value.toString().trim()).setScale(0, java.math.RoundingMode.CEILING).longValue()
    }

    /**
     * cpus, memory (MB) and time (s) of a component, from its labels.
     *
     * The labels are looked up in `labelResources` (the plan's `resources`, from _viash.yaml),
     * later labels overriding earlier ones; a value absent stays null (no limit).
     */
    static Map resources(Map component, Map labelResources) {
        def limits = [:]
        (component.labels ?: []).each { label -> limits.putAll((labelResources ?: [:]).get(label) ?: [:]) }
        return [cpus: asLong(limits.cpus), memory_mb: asLong(limits.memory_mb), time_s: asLong(limits.time_s),
                disk_mb: asLong(limits.disk_mb)]
    }

    /**
     * The GPUs a job asks its executor for (Nextflow's `accelerator`): the largest `gpus` of its
     * component's labels (the `gpu` label is `accelerator = 1`), or null. Only when `enabled` (the
     * profile's executor schedules accelerators), and never for a language-model component given a
     * server (`llmBaseUrl`): the server generates, the job only sends prompts.
     */
    static Object accelerator(Map job, Map labelResources, Object enabled, Object llmBaseUrl) {
        if (enabled == null || !enabled.toString().toBoolean())
            return null
        if (job.component?.needs_llm && llmBaseUrl != null && llmBaseUrl.toString() != '')
            return null
        def gpus = 0L
        (job.component?.labels ?: []).each { label ->
            gpus = Math.max(gpus, asLong(((labelResources ?: [:]).get(label) ?: [:]).gpus) ?: 0L)
        }
        return gpus > 0 ? gpus : null
    }

    /**
     * A job's limits on its `attempt`-th try: memory and time grow with the attempt (a job killed
     * for memory or time is retried bigger, as Open Problems does), then memory and cpus are capped
     * at job.caps (the local executor refuses a task bigger than the machine).
     */
    static Map attemptLimits(Map job, Object attempt) {
        def times = Math.max(1L, asLong(attempt) ?: 1L)
        def base = job.limits ?: [:]
        def cpus = asLong(base.cpus)
        def memoryMb = asLong(base.memory_mb)
        def timeS = asLong(base.time_s)
        if (memoryMb != null)
            memoryMb = memoryMb * times
        if (timeS != null)
            timeS = timeS * times
        def capCpus = asLong(job.caps?.cpus)
        def capMemory = asLong(job.caps?.memory_mb)
        if (cpus != null && capCpus != null)
            cpus = Math.min(cpus, capCpus)
        if (memoryMb != null && capMemory != null)
            memoryMb = Math.min(memoryMb, capMemory)
        // disk is not retried bigger: a job over its disk limit exits 153, which is not retried
        return [cpus: cpus, memory_mb: memoryMb, time_s: timeS, disk_mb: asLong(base.disk_mb)]
    }

    /**
     * A job made ready for a process: its limits, container, where it publishes and the settings
     * of its command, from the run's `options` (outdir, resources, max_cpus, max_memory_mb,
     * image_tag, openpert, sandbox, max_retries, llm, llm_image, gpu_accelerator). LLM settings go to LLM components only.
     */
    static Map prepare(Map job, Map options) {
        def component = job.component
        def settings = [openpert: options.openpert ?: 'openpert', sandbox: options.sandbox ?: 'auto', component_dir: 'component']
        settings.llm = component.needs_llm ? (options.llm ?: [:]).findAll { k, v -> v != null && v.toString() != '' } : [:]
        return job + [
            limits: resources(component, options.resources),
            caps: [cpus: asLong(options.max_cpus), memory_mb: asLong(options.max_memory_mb)],
            // LLM components run in the llm base image when one is named (vLLM in process)
            container: component.needs_llm && options.llm_image ? options.llm_image.toString() : image(component, options.image_tag),
            gpus: accelerator(job, options.resources, options.gpu_accelerator, options.llm?.llm_base_url),
            publish_path: "${options.outdir}/${job.publish_dir}".toString(),
            max_retries: asLong(options.max_retries) ?: 0L,
            settings: settings,
        ]
    }

    /** The seed replicates of a method: [[suffix: '', seed: null]] unless its `seeds` list some. */
    static List seedVariants(Map component) {
        def seeds = component.seeds
        if (seeds == null || (seeds instanceof Collection && seeds.isEmpty()))
            return [[suffix: '', seed: null]]
        if (!(seeds instanceof Collection))
            throw new IllegalArgumentException("openpert: ${component.config}: seeds must be a list of integers, got ${seeds}")
        return seeds.collect { k -> [suffix: "@seed${asLong(k)}".toString(), seed: asLong(k)] }
    }

    /** The keys of a map (null: none) as strings, sorted. */
    static List sortedKeys(Object map) {
        return (map ?: [:]).keySet().collect { key -> key.toString() }.sort()
    }

    /** A component's file inputs wired by format (argument names sorted): `upstream` first, then the dataset's files. */
    static List wire(String id, Map component, Map upstream, Map datasetFiles) {
        def args = []
        def files = []
        sortedKeys(component.inputs).each { arg ->
            def format = component.inputs.get(arg)
            def source = upstream.containsKey(format) ? upstream.get(format) : datasetFiles?.get(format)
            if (source == null)
                throw new IllegalArgumentException("openpert: job ${id}: nothing of format '${format}' for --${arg} of ${component.config}")
            args << arg.toString()
            files << source
        }
        return [args, files]
    }

    /** The job of a dataset loader (a plan `dataset_jobs` entry) and its input files (argument names sorted). */
    static List datasetJob(Map entry, Object sharedDataArgument, Object sharedData) {
        def args = []
        def files = []
        sortedKeys(entry.inputs).each { arg ->
            def source = entry.inputs.get(arg)
            args << arg.toString()
            // A cluster reads the shared data from where it is (e.g. s3://...), not the launcher's disk.
            files << (sharedData && arg.toString() == sharedDataArgument?.toString() ? sharedData : source)
        }
        def job = [
            id: (entry.job_id ?: "datasets/${entry.id}").toString(),
            stage: 'dataset',
            dataset_id: entry.id.toString(),
            method_id: null,
            seed: null,
            component: entry.component,
            args: args,
            params: entry.params ?: [:],
            publish_dir: "datasets/${entry.id}".toString(),
        ]
        return [job, files]
    }

    /** The jobs of a method on a dataset (one per seed replicate), each as [job, files]. */
    static List methodJobs(Map dataset, Map method) {
        return seedVariants(method).collect { variant ->
            def id = "${dataset.id}/${method.id}${variant.suffix}".toString()
            def wired = wire(id, method, [:], dataset.files)
            def params = [:] + (method.params ?: [:])
            if (variant.seed != null)
                params.seed = variant.seed
            def job = [
                id: id,
                stage: 'method',
                dataset: dataset,
                dataset_id: dataset.id.toString(),
                method_id: method.id.toString(),
                seed: variant.seed,
                component: method,
                args: wired[0],
                params: params,
                publish_dir: "outputs/${id}".toString(),
            ]
            [job, wired[1]]
        }
    }

    /** The job of a metric on a method job's prediction (`byFormat`: its outputs by format). */
    static List metricJob(Map methodJob, Map byFormat, Map metric) {
        def id = "${methodJob.id}/${metric.id}".toString()
        def wired = wire(id, metric, byFormat, methodJob.dataset.files)
        def job = [
            id: id,
            stage: 'metric',
            dataset: methodJob.dataset,
            dataset_id: methodJob.dataset_id,
            method_id: methodJob.method_id,
            seed: methodJob.seed,
            component: metric,
            args: wired[0],
            params: [:] + (metric.params ?: [:]),
            publish_dir: "outputs/${id}".toString(),
        ]
        return [job, wired[1]]
    }

    /** The name of a file: a Path's last part, or a path string's. */
    static String fileName(Object file) {
        if (file instanceof java.nio.file.Path)
            return file.getFileName().toString()
        return file.toString().tokenize('/').last()
    }

    /** A job's emitted outputs (files named as `output_names` says) as format -> file. */
    static Map outputsByFormat(Map job, List files) {
        def byFormat = [:]
        (job.component.output_names ?: [:]).each { arg, name ->
            def found = files.find { f -> fileName(f) == name.toString() }
            def format = job.component.outputs?.get(arg)
            if (found != null && format != null)
                byFormat[format.toString()] = found
        }
        return byFormat
    }

    /** The image of a component, with its tag replaced by `tag` when one is given (a build's tag). */
    static String image(Map component, Object tag) {
        def name = component.image?.toString()
        if (!name)
            return null
        if (!tag)
            return name
        def slash = name.lastIndexOf('/')
        def colon = name.lastIndexOf(':')
        def repository = colon > slash ? name.substring(0, colon) : name
        return "${repository}:${tag}".toString()
    }

    /**
     * The words of a job's `openpert run-component` command, each quoted for bash.
     *
     * `staged`: its input files as staged in the task folder, in the order of job.args;
     * `limits`: [cpus:, memory_mb:, time_s:] of this attempt. job.settings (from prepare) gives
     * openpert (the command), component_dir (where the component folder is staged), sandbox
     * (auto, on or off) and llm (argument -> value, for components that talk to a language model).
     */
    static List commandWords(Map job, List staged, Map limits) {
        def settings = job.settings ?: [:]
        if (staged.size() != job.args.size())
            throw new IllegalArgumentException("openpert: job ${job.id}: ${job.args.size()} file arguments but ${staged.size()} files")
        def component = job.component
        def config = "${settings.component_dir ?: 'component'}/${component.bundle_config}".toString()
        def words = [shellQuote(settings.openpert ?: 'openpert'), shellQuote('run-component')]
        words += [shellQuote('--work-dir'), shellQuote('run'), shellQuote('--sandbox'), shellQuote(settings.sandbox ?: 'auto')]
        if (limits?.cpus != null)
            words += [shellQuote('--limit-cpus'), shellQuote(limits.cpus)]
        if (limits?.memory_mb != null)
            words += [shellQuote('--limit-memory-mb'), shellQuote(limits.memory_mb)]
        if (limits?.time_s != null)
            words += [shellQuote('--limit-time-s'), shellQuote(limits.time_s)]
        words << shellQuote(config)
        [job.args, staged].transpose().each { pair ->
            words += [shellQuote("--${pair[0]}"), shellQuote(pair[1])]
        }
        sortedKeys(component.output_names).each { arg ->
            words += [shellQuote("--${arg}"), shellQuote("out/${component.output_names.get(arg)}")]
        }
        def params = [:] + (job.params ?: [:])
        (settings.llm ?: [:]).each { name, value -> if (value != null && value.toString() != '') params[name] = value }
        sortedKeys(params).each { name ->
            def value = params.get(name)
            if (value != null) {
                // several values: Viash's default multiple separator
                def text = value instanceof Collection ? value.collect { v -> v.toString() }.join(';') : value.toString()
                words += [shellQuote("--${name}"), shellQuote(text)]
            }
        }
        return words
    }

    /**
     * The bash script of a job: a private temporary folder inside the task's work folder (and the
     * home folder when the given one cannot be written: a container run as the launching user, as
     * the docker profile does, has HOME=/), the staged component's pertsci first on PYTHONPATH (the
     * code the digest covers), the command, then the job's scratch removed (kept when it failed,
     * for its logs).
     */
    static String taskScript(Map job, List staged, Object attempt) {
        def common = shellQuote("${job.settings?.component_dir ?: 'component'}/common")
        return [
            'mkdir -p out tmp',
            'export TMPDIR="$PWD/tmp"',
            'if [ ! -w "${HOME:-/}" ]; then export HOME="$PWD/tmp"; fi',
            'export PYTHONPATH="$PWD"/' + common + '"${PYTHONPATH:+:$PYTHONPATH}"',
            commandWords(job, staged, attemptLimits(job, attempt)).join(' '),
            'rm -rf run tmp',
        ].join('\n')
    }
}
