//! Chat templates: the built-in Qwen3.5 format (text and ids), templates taken from model
//! metadata with the variables Hugging Face passes, and template errors.

use baro_engine::tokenizer::{ChatMessage, ChatOptions, ChatTemplate, Specials, Tokenizer, TokenizerError};

fn no_thinking() -> ChatOptions {
    ChatOptions { add_generation_prompt: true, enable_thinking: Some(false), ..ChatOptions::default() }
}

#[test]
fn readme_chat_prompt_encodes_to_the_listed_ids() {
    let tok = Tokenizer::qwen35().unwrap();
    let prompt = ChatTemplate::qwen35()
        .render(&[ChatMessage::new("user", "What is 2+2? Think step by step.")], &no_thinking())
        .unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>user\nWhat is 2+2? Think step by step.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    );
    assert_eq!(
        tok.encode(&prompt, Specials::With).unwrap(),
        [
            248045, 846, 198, 3710, 369, 220, 17, 10, 17, 30, 20500, 2923, 539, 2923, 13, 248046, 198, 248045, 74455,
            198, 248068, 271, 248069, 271
        ]
    );
}

#[test]
fn qwen35_template_variants() {
    let t = ChatTemplate::qwen35();
    let messages = [
        ChatMessage::new("system", "Be brief."),
        ChatMessage::new("user", "Hi"),
        ChatMessage::new("assistant", "<think>\nthe user greets\n</think>\n\nHello!"),
        ChatMessage::new("user", "Bye"),
    ];
    let history = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
                   <|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n";
    assert_eq!(t.render(&messages, &ChatOptions::default()).unwrap(), history);
    let thinking = ChatOptions { add_generation_prompt: true, enable_thinking: Some(true), ..ChatOptions::default() };
    assert_eq!(t.render(&messages, &thinking).unwrap(), format!("{history}<|im_start|>assistant\n"));
    let unset = ChatOptions { add_generation_prompt: true, ..ChatOptions::default() };
    assert_eq!(t.render(&messages, &unset).unwrap(), format!("{history}<|im_start|>assistant\n"));
    assert_eq!(
        t.render(&messages, &no_thinking()).unwrap(),
        format!("{history}<|im_start|>assistant\n<think>\n\n</think>\n\n")
    );
    assert_eq!(t.render(&[], &ChatOptions::default()).unwrap(), "");
}

/// A template in the style of those shipped in model metadata: python string methods,
/// `raise_exception`, `loop`, `bos_token`, whitespace control by trim_blocks/lstrip_blocks,
/// booleans printed as Python prints them.
const METADATA_TEMPLATE: &str = "{{ bos_token }}
{%- if messages[0].role != 'system' %}
    {{- raise_exception('expected a system message first, found ' + messages[0].role) }}
{%- endif %}
{% for message in messages %}
    [{{ loop.index0 }}] {{ message.role | upper }}: {{ message.content.strip() }}
{% endfor %}
{% if add_generation_prompt %}
    {%- if enable_thinking is defined %}thinking={{ enable_thinking }}{% endif %}
>>>{{ eos_token }}
{%- endif %}";

#[test]
fn template_from_metadata() {
    let t = ChatTemplate::from_source(METADATA_TEMPLATE).unwrap();
    let messages = [ChatMessage::new("system", "  sys  "), ChatMessage::new("user", "hello\n")];
    let opts = ChatOptions {
        add_generation_prompt: true,
        enable_thinking: Some(true),
        bos_token: "<s>".into(),
        eos_token: "</s>".into(),
    };
    assert_eq!(
        t.render(&messages, &opts).unwrap(),
        "<s>    [0] SYSTEM: sys\n    [1] USER: hello\nthinking=True>>></s>"
    );
    let opts = ChatOptions { add_generation_prompt: false, ..opts };
    assert_eq!(t.render(&messages, &opts).unwrap(), "<s>    [0] SYSTEM: sys\n    [1] USER: hello\n");
}

#[test]
fn template_errors_are_reported() {
    let t = ChatTemplate::from_source(METADATA_TEMPLATE).unwrap();
    let err = t.render(&[ChatMessage::new("user", "x")], &ChatOptions::default()).unwrap_err();
    assert!(matches!(err, TokenizerError::Template { .. }), "{err}");
    assert!(err.to_string().contains("expected a system message first, found user"), "{err}");

    let err = ChatTemplate::from_source("{% for m in messages %}{{ m.content }}").unwrap_err();
    assert!(matches!(err, TokenizerError::Template { .. }), "{err}");
    assert!(err.to_string().starts_with("chat template: "), "{err}");

    let err =
        ChatTemplate::from_source("{{ messages.nope() }}").unwrap().render(&[], &ChatOptions::default()).unwrap_err();
    assert!(matches!(err, TokenizerError::Template { .. }), "{err}");
}

/// Renders `source` with one user message and no generation prompt.
fn render(source: &str) -> Result<String, TokenizerError> {
    ChatTemplate::from_source(source)?.render(&[ChatMessage::new("user", "hi")], &ChatOptions::default())
}

#[test]
fn a_namespace_that_holds_itself_is_a_template_error_not_a_stack_overflow() {
    // Found by fuzzing (fuzz/regressions/chat_template/): each of these overflowed the stack.
    for use_it in ["{{ ns }}", "{{ ns|tojson }}", "{{ '' ~ ns }}", "{{ ns.a|string }}", "{{ [ns]|join }}"] {
        for store in [
            "{% set ns.a = ns %}",
            "{% set ns.a = [ns] %}",
            "{% set m = {'x': ns} %}{% set ns.a = m %}",
            "{% set ns.a = namespace(b=ns) %}",
        ] {
            let source = format!("{{% set ns = namespace() %}}{store}{use_it}");
            match render(&source) {
                Err(TokenizerError::Template { message: m }) => assert!(m.contains("holds itself"), "{source}: {m}"),
                other => panic!("{source}: expected a template error, found {other:?}"),
            }
        }
    }
    // Two namespaces holding each other, and a chain built in a loop, deeper than the limit.
    let pair = "{% set a = namespace() %}{% set b = namespace(x=a) %}{% set a.x = b %}{{ a }}";
    assert!(matches!(render(pair), Err(TokenizerError::Template { .. })), "{pair}");
    let chain = "{% set ns = namespace(v=0) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}";
    assert!(matches!(render(chain), Err(TokenizerError::Template { .. })), "{chain}");
}

#[test]
fn namespace_assignments_render_as_before() {
    // The check inserted after each `{% set x.y = ... %}` keeps its whitespace control.
    let cases = [
        ("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", "1"),
        ("a\n{% set ns = namespace() %}\n{% set ns.x = 'v' %}\nb{{ ns.x }}", "a\nbv"),
        ("a  \n  {%- set ns = namespace() -%}  \n  {%- set ns.x = 1 -%}  \n  b", "ab"),
        ("a\n{% set ns = namespace() %}{% set ns.x = 1 +%}\nb", "a\n\nb"),
        ("{% set ns = namespace() %}{% set ns.x %}in{{ 1 }}{% endset %}{{ ns.x }}|{% raw %}{% set ns.y = 1 %}{% endraw %}", "in1|{% set ns.y = 1 %}"),
        ("{% set ns = namespace(a=1) %}{% set ns.a, x = 2, 3 %}{{ ns.a }}{{ x }} {{ '%}' }}{% set ns.s = '%}' %}{{ ns.s }}", "23 %}%}"),
        ("{% set ns = namespace(m=none) %}{% for m in messages %}{% set ns.m = m %}{% endfor %}{{ ns.m.role }}:{{ ns.m.content }}", "user:hi"),
    ];
    for (source, want) in cases {
        assert_eq!(render(source).unwrap_or_else(|e| panic!("{source}: {e}")), want, "{source}");
    }
}

#[test]
fn a_panic_inside_minijinja_is_a_template_error() {
    // Found by fuzzing (fuzz/regressions/chat_template/empty_string_reverse_slice_panic.txt):
    // minijinja 2.24 indexes past the end reversing an empty string.
    let source = "{{ ''[::-1] }}";
    match render(source) {
        Err(TokenizerError::Template { message }) => assert!(message.contains("panicked"), "{message}"),
        other => panic!("{source}: expected a template error, found {other:?}"),
    }
    assert_eq!(render("{{ 'ab'[::-1] }}").unwrap(), "ba");
}
