//! Server-side render time of a conversation page with 200 messages and a waiting card: what a
//! page load costs the server beyond its API calls.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use llooma_types::{ApprovalCardView, ConversationDetail, ConversationView, MessageView};
use llooma_web::model::{Me, Page};

fn page(messages: usize) -> Page {
    let conversation = ConversationView {
        id: "c0ffee00-0000-4000-8000-000000000000".into(),
        title: "A long conversation".into(),
        provider_id: Some("p".into()),
        model: Some("fake-model".into()),
        mcp_enabled: true,
        persona_id: None,
        created_at: "2026-11-30T06:00:00Z".into(),
        updated_at: "2026-11-30T07:00:00Z".into(),
    };
    let messages = (0..messages)
        .map(|i| MessageView {
            id: format!("m{i}"),
            role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
            content: format!("Message {i}: {}", "some words of a reply, ".repeat(12)),
            turn_id: Some(format!("t{}", i / 2)),
            created_at: "2026-11-30T06:00:00Z".into(),
            files: Vec::new(),
        })
        .collect();
    let card = ApprovalCardView {
        id: "call".into(),
        conversation_id: conversation.id.clone(),
        turn_id: "t99".into(),
        server_id: "s".into(),
        server_label: "everything".into(),
        tool_name: "echo".into(),
        model_tool_name: "everything-echo".into(),
        tool_description: "Echoes back the input string".into(),
        arguments_json: r#"{"message":"hello"}"#.into(),
        created_at_ms: 0,
        deadline_ms: 120_000,
        tool_hints: None,
        question: None,
    };
    Page::Conversation {
        me: Me {
            username: "root".into(),
            display_name: "root".into(),
            admin: true,
            csrf_token: "token".into(),
        },
        detail: ConversationDetail {
            conversation,
            messages,
            running_turn: None,
            events_after: 0,
            replies: Vec::new(),
            pending_files: Vec::new(),
            summary: None,
            older_messages: None,
        },
        cards: vec![card],
        providers: vec![],
        personas: vec![],
        attachables: Default::default(),
        always_allow: false,
        now_ms: 0,
        conversations: Vec::new(),
        older: None,
    }
}

const ASSETS: llooma_web::server::Assets<'static> = llooma_web::server::Assets {
    style: "style.0123456789abcdef.css",
    client: Some(("llooma_web.0123456789abcdef.js", "llooma_web_bg.0123456789abcdef.wasm")),
};

fn render(c: &mut Criterion) {
    let page = page(200);
    c.bench_function("render/conversation_200_messages", |b| {
        b.iter(|| llooma_web::server::render(black_box(&page), "nonce", &ASSETS))
    });
}

criterion_group!(benches, render);
criterion_main!(benches);
