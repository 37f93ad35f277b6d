/*
 * The task scripts of a plan's method jobs, from the plan read as Nextflow reads a -params-file:
 * with Groovy's JsonSlurper (whose maps need not keep the file's order).
 *
 *     groovy -cp lib plan_scripts.groovy plan.json options.json
 *
 * Prints a JSON list of [id: <job id>, script: <task script of attempt 1>], each input staged as
 * in<i>/<name>.
 */
import groovy.json.JsonOutput
import groovy.json.JsonSlurper

def plan = new JsonSlurper().parse(new File(args[0]))
def options = new JsonSlurper().parse(new File(args[1]))
def scripts = []
plan.datasets.each { dataset ->
    plan.methods.each { method ->
        OpenpertJobs.methodJobs(dataset, method).each { pair ->
            def job = OpenpertJobs.prepare(pair[0], options)
            def staged = pair[1].withIndex().collect { file, i -> "in${i + 1}/${OpenpertJobs.fileName(file)}".toString() }
            scripts << [id: job.id, script: OpenpertJobs.taskScript(job, staged, 1)]
        }
    }
}
println JsonOutput.toJson(scripts)
