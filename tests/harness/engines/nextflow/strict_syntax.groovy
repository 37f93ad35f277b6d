/*
 * Parse a Nextflow script or config file with Groovy and check it against the rules of Nextflow's
 * strict syntax (the default parser from Nextflow 26.04, NXF_SYNTAX_PARSER=v2), as its
 * documentation lists them ("Preparing for strict syntax" and the configuration syntax):
 *
 * scripts
 *   - no import declarations, no class declarations (enums are allowed; classes go in lib/)
 *   - top level: only feature flags, includes (without addParams/params), params, workflows,
 *     processes, functions and an output block; no statement mixed with them
 *   - no for, while or do loops, no switch, no spread operator, no ++ or --, no assignment
 *     inside an expression, no soft casts `(Type) x`
 *   - variables declared with `def` only: no `final`, no Groovy-style type
 *   - no dollar-slashy strings; process `env` names quoted; the `script:` label present when a
 *     process has other sections; no `shell:` section; closures name their parameter (no
 *     implicit `it`); `channel`, not `Channel`
 *   - params used in the entry workflow only (the best practice of the strict parser's paranoid
 *     mode: functions and processes get values passed in)
 * configs
 *   - only assignments, blocks and includeConfig: no functions, variables, if statements or other
 *     statements outside closures; no imports
 *   - an assigned value refers to no variable but params (other config settings cannot be
 *     referenced as variables); closures (dynamic directives) may use anything
 *
 * Usage: groovy strict_syntax.groovy script|config <file>
 * Prints one problem a line as `<file>:<line>: <problem>` and exits 1 when there are any; a file
 * that does not parse exits 2 with the parser's message.
 *
 * Usage: groovy strict_syntax.groovy script|config <file> script|config <file> ...
 * Checks every file in one run and prints a JSON list with, for each, `file`, `code` (as the exit
 * code above) and `lines` (its problems, or the parser's message); exits 0.
 */
import org.codehaus.groovy.ast.ClassCodeVisitorSupport
import org.codehaus.groovy.ast.ClassNode
import org.codehaus.groovy.ast.ModuleNode
import org.codehaus.groovy.ast.expr.*
import org.codehaus.groovy.ast.stmt.*
import org.codehaus.groovy.control.CompilationUnit
import org.codehaus.groovy.control.MultipleCompilationErrorsException
import org.codehaus.groovy.control.Phases
import org.codehaus.groovy.control.SourceUnit

import java.lang.reflect.Modifier

class StrictRules extends ClassCodeVisitorSupport {
    SourceUnit source
    List<String> problems = []
    Set<Expression> statementExpressions = Collections.newSetFromMap(new IdentityHashMap<Expression, Boolean>())
    String fileName

    void problem(node, String text) {
        problems << "${fileName}:${node?.lineNumber ?: 0}: ${text}".toString()
    }

    protected SourceUnit getSourceUnit() { source }

    void visitExpressionStatement(ExpressionStatement statement) {
        statementExpressions << statement.expression
        super.visitExpressionStatement(statement)
    }

    void visitForLoop(ForStatement loop) {
        problem(loop, 'for loop (use each, collect, ... instead)')
        super.visitForLoop(loop)
    }

    void visitWhileLoop(WhileStatement loop) {
        problem(loop, 'while loop (use each, collect, ... instead)')
        super.visitWhileLoop(loop)
    }

    void visitDoWhileLoop(DoWhileStatement loop) {
        problem(loop, 'do-while loop')
        super.visitDoWhileLoop(loop)
    }

    void visitSwitch(SwitchStatement statement) {
        problem(statement, 'switch statement (use if-else)')
        super.visitSwitch(statement)
    }

    // Groovy's visitor steps over a spread inside a list or an argument list without visiting it
    protected void visitListOfExpressions(List<? extends Expression> list) {
        list.findAll { e -> e instanceof SpreadExpression }.each { e -> problem(e, 'spread operator') }
        super.visitListOfExpressions(list)
    }

    void visitSpreadExpression(SpreadExpression expression) {
        problem(expression, 'spread operator')
        super.visitSpreadExpression(expression)
    }

    void visitSpreadMapExpression(SpreadMapExpression expression) {
        problem(expression, 'spread map operator')
        super.visitSpreadMapExpression(expression)
    }

    void visitPostfixExpression(PostfixExpression expression) {
        problem(expression, "${expression.operation.text} in an expression (use += or -= as a statement)")
        super.visitPostfixExpression(expression)
    }

    void visitPrefixExpression(PrefixExpression expression) {
        problem(expression, "${expression.operation.text} in an expression (use += or -= as a statement)")
        super.visitPrefixExpression(expression)
    }

    void visitBinaryExpression(BinaryExpression expression) {
        def op = expression.operation.text
        def assigning = op in ['=', '+=', '-=', '*=', '/=', '%=', '**=', '<<=', '>>=', '&=', '|=', '^=', '?=']
        if (assigning && !(expression instanceof DeclarationExpression) && !statementExpressions.contains(expression))
            problem(expression, 'assignment inside an expression (assign in a statement of its own)')
        super.visitBinaryExpression(expression)
    }

    void visitDeclarationExpression(DeclarationExpression expression) {
        if (expression.isMultipleAssignmentDeclaration()) {
            expression.tupleExpression.expressions.each { v -> checkDeclared(expression, v) }
        } else {
            checkDeclared(expression, expression.variableExpression)
        }
        super.visitDeclarationExpression(expression)
    }

    void checkDeclared(node, VariableExpression variable) {
        if (Modifier.isFinal(variable.modifiers))
            problem(node, "variable '${variable.name}' declared final (declare it with def)")
        if (!variable.isDynamicTyped())
            problem(node, "variable '${variable.name}' declared with a Groovy type (declare it with def)")
    }

    void visitCastExpression(CastExpression expression) {
        if (!expression.isCoerce())
            problem(expression, "soft cast to ${expression.type.name} (use 'as' or a conversion method)")
        super.visitCastExpression(expression)
    }

    void visitClosureExpression(ClosureExpression closure) {
        if (!closure.isParameterSpecified()) {
            def finder = new ItFinder()
            closure.code?.visit(finder)
            if (finder.found)
                problem(closure, "closure uses the implicit parameter 'it' (name it: { v -> ... })")
        }
        super.visitClosureExpression(closure)
    }

    void visitVariableExpression(VariableExpression expression) {
        if (expression.name == 'Channel')
            problem(expression, "'Channel' (use the 'channel' namespace)")
        super.visitVariableExpression(expression)
    }

    void visitClassExpression(ClassExpression expression) {
        if (expression.type.name == 'Channel')
            problem(expression, "'Channel' (use the 'channel' namespace)")
        super.visitClassExpression(expression)
    }
}

// Finds a use of `it` that belongs to the closure being checked (not to a nested closure).
class ItFinder extends org.codehaus.groovy.ast.CodeVisitorSupport {
    boolean found = false

    void visitVariableExpression(VariableExpression expression) {
        if (expression.name == 'it')
            found = true
    }

    void visitClosureExpression(ClosureExpression closure) {
        // a nested closure has its own `it`
    }
}

def methodName(MethodCallExpression call) {
    return call.implicitThis ? call.methodAsString : null
}

def closureArgument(MethodCallExpression call) {
    def arguments = call.arguments instanceof ArgumentListExpression ? call.arguments.expressions : []
    return arguments.size() == 1 && arguments[0] instanceof ClosureExpression ? arguments[0] : null
}

def rootName(Expression expression) {
    def node = expression
    while (node instanceof PropertyExpression)
        node = node.objectExpression
    return node instanceof VariableExpression ? node.name : null
}

// --- scripts -----------------------------------------------------------------------------------
def checkProcess(StrictRules rules, ClosureExpression body) {
    def statements = body.code instanceof BlockStatement ? body.code.statements : []
    def labels = statements.collect { s -> s.statementLabel }.findAll { l -> l != null }
    if ('shell' in labels)
        rules.problem(body, "process 'shell:' section (use script:)")
    if (labels && !('script' in labels || 'exec' in labels) && !('shell' in labels))
        rules.problem(body, "process without a 'script:' label beside its other sections")
    statements.each { s ->
        if (s instanceof ExpressionStatement && s.expression instanceof MethodCallExpression && methodName(s.expression) == 'env') {
            def arguments = s.expression.arguments.expressions
            if (arguments && arguments[0] instanceof VariableExpression)
                rules.problem(s, "env input or output '${arguments[0].name}' must be quoted")
        }
    }
}

def checkScriptTop(StrictRules rules, Statement statement) {
    def expression = statement instanceof ExpressionStatement ? statement.expression : null
    if (expression instanceof BinaryExpression && expression.operation.text == '=') {
        def root = rootName(expression.leftExpression)
        if (root == 'params' || root == 'nextflow')
            return
    }
    if (expression instanceof MethodCallExpression) {
        def call = expression
        // include { a; b as c } from './x'
        if (call.methodAsString == 'from' && call.objectExpression instanceof MethodCallExpression
                && methodName(call.objectExpression) == 'include') {
            return
        }
        if (call.methodAsString in ['addParams', 'params'] && call.objectExpression instanceof MethodCallExpression) {
            rules.problem(statement, 'include with addParams or params (pass params as inputs)')
            return
        }
        def name = methodName(call)
        if (name in ['workflow', 'process', 'output', 'params', 'include']) {
            if (name == 'process') {
                def named = call.arguments.expressions ? call.arguments.expressions[0] : null
                def body = named instanceof MethodCallExpression ? closureArgument(named) : null
                if (body != null)
                    checkProcess(rules, body)
            }
            return
        }
    }
    rules.problem(statement, 'statement outside a workflow, process or function (move it into the entry workflow)')
}

// include, workflow, process, output or params: what makes a script more than a code snippet
def isDeclaration(Statement statement) {
    def expression = statement instanceof ExpressionStatement ? statement.expression : null
    while (expression instanceof MethodCallExpression && !expression.implicitThis)
        expression = expression.objectExpression
    return expression instanceof MethodCallExpression && methodName(expression) in ['workflow', 'process', 'output', 'params', 'include']
}

def isProcess(Statement statement) {
    return statement instanceof ExpressionStatement && statement.expression instanceof MethodCallExpression &&
        methodName(statement.expression) == 'process'
}

def checkScript(StrictRules rules, ModuleNode module, String text) {
    if (module.imports || module.starImports || module.staticImports || module.staticStarImports)
        rules.problem(null, 'import declaration (use the fully qualified class name)')
    module.classes.findAll { c -> !c.isScript() && !c.isEnum() }.each { c ->
        rules.problem(c, "class declaration '${c.name}' (move it to lib/)")
    }
    def statements = module.statementBlock.statements
    def declarations = statements.findAll { s -> isDeclaration(s) }
    // a script of statements only is a code snippet (an implicit workflow); otherwise no mixing
    if (!module.methods.isEmpty() || !declarations.isEmpty())
        statements.each { s -> checkScriptTop(rules, s) }
    // best practice the strict parser's paranoid mode reports: params only in the entry workflow
    def outside = new ParamsFinder()
    module.methods.each { m -> m.code?.visit(outside) }
    statements.findAll { s -> isProcess(s) }.each { s -> s.visit(outside) }
    outside.found.each { v -> rules.problem(v, 'params used outside the entry workflow (pass the value in)') }
    text.eachLine { line, index ->
        if (line.contains('$/'))
            rules.problem([lineNumber: index + 1], 'dollar-slashy string (use a multi-line string)')
    }
}

class ParamsFinder extends org.codehaus.groovy.ast.CodeVisitorSupport {
    List<VariableExpression> found = []

    void visitVariableExpression(VariableExpression expression) {
        if (expression.name == 'params')
            found << expression
    }
}

// --- configs -----------------------------------------------------------------------------------
class ValueReferences extends org.codehaus.groovy.ast.CodeVisitorSupport {
    List<VariableExpression> found = []

    void visitVariableExpression(VariableExpression expression) {
        found << expression
    }

    void visitClosureExpression(ClosureExpression closure) {
        // a closure is evaluated per task: it may use task, the process inputs and more
    }
}

def checkConfigBlock(StrictRules rules, List<Statement> statements) {
    statements.each { s ->
        def expression = s instanceof ExpressionStatement ? s.expression : null
        if (expression instanceof BinaryExpression && !(expression instanceof DeclarationExpression)
                && expression.operation.text == '=' && rootName(expression.leftExpression) != null) {
            def references = new ValueReferences()
            expression.rightExpression.visit(references)
            references.found.findAll { v -> !(v.name in ['params', 'this']) }.each { v ->
                rules.problem(s, "'${v.name}' referenced in a config value (only params may be referenced)")
            }
            return
        }
        if (expression instanceof MethodCallExpression && expression.implicitThis) {
            def block = closureArgument(expression)
            if (block != null) {
                checkConfigBlock(rules, block.code instanceof BlockStatement ? block.code.statements : [])
                return
            }
            if (expression.methodAsString == 'includeConfig')
                return
        }
        rules.problem(s, 'config statement that is not an assignment, a block or includeConfig')
    }
}

def checkConfig(StrictRules rules, ModuleNode module) {
    if (module.imports || module.starImports || module.staticImports || module.staticStarImports)
        rules.problem(null, 'import declaration in a config file')
    module.methods.each { m -> rules.problem(m, "function declaration '${m.name}' in a config file") }
    module.classes.findAll { c -> !c.isScript() }.each { c -> rules.problem(c, "class declaration '${c.name}' in a config file") }
    checkConfigBlock(rules, module.statementBlock.statements)
}

// --- main ----------------------------------------------------------------------------------------
/** Exit code (0, 1, or 2 when the file does not parse) and the lines to print of one file. */
def check(String kind, File file) {
    def text = file.text
    def unit = new CompilationUnit()
    def source = unit.addSource(file.name, text)
    try {
        unit.compile(Phases.CONVERSION)
    } catch (MultipleCompilationErrorsException err) {
        return [2, ["${file}: does not parse: ${err.message}".toString()]]
    }
    def module = source.AST
    def rules = new StrictRules(source: source, fileName: file.toString())
    // every statement and method body, with the general rules
    module.statementBlock.visit(rules)
    module.methods.each { m -> m.code?.visit(rules) }
    module.classes.findAll { c -> !c.isScript() }.each { c -> rules.visitClass(c) }
    if (kind == 'script')
        checkScript(rules, module, text)
    else
        checkConfig(rules, module)
    return [rules.problems ? 1 : 0, rules.problems]
}

def pairs = args.toList().collate(2)
if (!pairs || pairs.any { p -> p.size() != 2 || !(p[0] in ['script', 'config']) }) {
    System.err.println('usage: groovy strict_syntax.groovy script|config <file> [script|config <file> ...]')
    System.exit(64)
}
if (pairs.size() == 1) {
    def (code, lines) = check(pairs[0][0], new File(pairs[0][1]))
    if (code == 2) {
        System.err.println(lines[0])
    } else {
        lines.each { p -> println p }
    }
    System.exit(code)
}
// Several files: one JVM start (most of a check's time) for them all, their outcomes as JSON.
println groovy.json.JsonOutput.toJson(pairs.collect { p ->
    def (code, lines) = check(p[0], new File(p[1]))
    [file: p[1], code: code, lines: lines]
})
