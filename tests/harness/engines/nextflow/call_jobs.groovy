/*
 * Calls functions of lib/OpenpertJobs.groovy and prints what they return, as JSON.
 *
 *     groovy -cp lib call_jobs.groovy calls.groovy
 *
 * calls.groovy is a Groovy script returning a list of [fn: <name>, args: [...]] (Groovy literals
 * keep the order of maps, as a plan has it); the output is a JSON list with, for each call,
 * {"value": <result>} or {"error": <message>} (the IllegalArgumentException the function threw).
 */
import groovy.json.JsonOutput

def calls = new GroovyShell(this.class.classLoader).evaluate(new File(args[0]))
def results = calls.collect { call ->
    try {
        [value: OpenpertJobs.invokeMethod(call.fn, call.args as Object[])]
    } catch (IllegalArgumentException err) {
        [error: err.message]
    }
}
println JsonOutput.toJson(results)
