//! The call pipeline's admission (issue #51): what `Pipeline::admit` adds to
//! a call with no policy, with 10 and with 1,000 Cedar policies, and with a
//! quota, against the check today's path made (the tool lists alone); and a
//! quota held in process against the same quota shared by replicas (grants
//! from PostgreSQL with `--pg-url`). In process, one call's admission at a
//! time: the stage's own cost, not a round trip.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wf_host::config::{Principal, QuotaConfig, QuotaScope, ServerConfig};
use wf_host::pipeline::policy::{CatalogShape, Policies, ToolShape};
use wf_host::pipeline::quota::Quotas;
use wf_host::pipeline::quota::shared::Grants;
use wf_host::pipeline::{
    Authorize, Call, Capability, Entry, Kind, Pipeline, Refusal, Stage, Transport,
};
use wf_host::server::ToolAccess;
use wf_host::store::{BudgetSpec, Grant, Store, new_id};

use crate::Env;
use crate::stats::{percentile, us};

/// The tool lists as an authorize stage (as `wf serve` registers them).
struct Lists(ToolAccess);

impl Authorize for Lists {
    fn authorize(&self, call: &Call<'_>) -> Result<Vec<String>, Refusal> {
        match self.0.refusal(call.principal, call.capability.name) {
            None => Ok(Vec::new()),
            Some(why) => Err(Refusal::new(Stage::Authorize, why)),
        }
    }
    fn may_list(&self, principal: &Principal, capability: &Capability<'_>) -> bool {
        self.0.permits(principal, capability.name)
    }
}

/// `n` tools and `n` policies: a baseline permit and, per tool, a principal's
/// argument rule (the "support may create issues only in acme/*").
fn policies(n: usize) -> anyhow::Result<Policies> {
    let schema = json!({"type": "object", "properties": {"repo": {"type": "string"}, "title": {"type": "string"}}, "required": ["repo"]});
    let catalog = CatalogShape {
        tools: (0..n.max(1))
            .map(|i| ToolShape {
                name: format!("gh__create_issue_{i}"),
                source: "gh".into(),
                input_schema: schema.clone(),
            })
            .collect(),
        prompts: Vec::new(),
    };
    let mut text = String::from("@id(\"everyone\")\npermit(principal, action, resource);\n");
    for i in 0..n.saturating_sub(1) {
        text.push_str(&format!(
            "@id(\"p{i}\")\n@reason(\"only acme\")\nforbid(principal == wf::Principal::\"alice\", action == wf::Action::\"gh__create_issue_{i}\", resource)\nunless {{ context.arguments.repo like \"acme/*\" }};\n"
        ));
    }
    Ok(Policies::from_texts(
        &[("bench.cedar".into(), text)],
        &catalog,
    )?)
}

fn sample(n: usize, mut admit: impl FnMut() -> bool) -> anyhow::Result<Vec<Duration>> {
    let warm = n / 10;
    let mut out = Vec::with_capacity(n);
    for i in 0..n + warm {
        let t = Instant::now();
        let ok = admit();
        let took = t.elapsed();
        if !ok {
            anyhow::bail!("a call the benchmark expects admitted was refused");
        }
        if i >= warm {
            out.push(took);
        }
    }
    Ok(out)
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("policy: the call pipeline's admission, with and without policies");
    let n = if env.quick { 2_000 } else { 20_000 };
    // A named principal (a token's): the tool lists refuse an OAuth one in no configured group.
    let who = Principal::named("alice");
    let args: Value = json!({"repo": "acme/web", "title": "t"});
    let call = Call {
        entry: Entry::ToolsCall,
        principal: &who,
        capability: Capability {
            kind: Kind::Tool,
            source: "gh",
            name: "gh__create_issue_0",
            annotations: None,
        },
        arguments: &args,
        client: Some("bench"),
        client_version: None,
        endpoint: None,
        transport: Transport::Http,
    };
    let lists = ToolAccess::from_config(&ServerConfig::default())?;
    let mut rows: Vec<(String, Vec<Duration>)> = Vec::new();
    // Today's path before the pipeline: the tool lists' check, inline.
    rows.push((
        "tool lists inline (before the pipeline)".into(),
        sample(n, || lists.refusal(&who, "gh__create_issue_0").is_none())?,
    ));
    let pipeline = Pipeline::default();
    pipeline.set_authorizer(
        "tool_lists",
        Arc::new(Lists(ToolAccess::from_config(&ServerConfig::default())?)),
    );
    rows.push((
        "pipeline, no policy".into(),
        sample(n, || pipeline.admit(&call).is_ok())?,
    ));
    for count in [10, 1_000] {
        let p = Pipeline::default();
        p.set_authorizer(
            "tool_lists",
            Arc::new(Lists(ToolAccess::from_config(&ServerConfig::default())?)),
        );
        p.set_authorizer("policies", Arc::new(policies(count)?));
        rows.push((
            format!("pipeline, {count} policies"),
            sample(n, || {
                p.admit(&call)
                    .map_err(|e| eprintln!("refused: {e}"))
                    .is_ok()
            })?,
        ));
    }
    let p = Pipeline::default();
    let rule = QuotaConfig {
        rate: Some(format!("{}/s", u32::MAX)),
        ..Default::default()
    };
    p.set_quotas(Some(Quotas::from_config(&[rule], None)?));
    rows.push((
        "pipeline, one quota (rate)".into(),
        sample(n, || {
            p.admit(&call)
                .map_err(|e| eprintln!("refused: {e}"))
                .is_ok()
        })?,
    ));

    let (shared_rows, grant_note) = replica_quota(env, &call, n).await?;
    rows.extend(shared_rows);

    println!("\n## The call pipeline's admission\n");
    println!(
        "One `tools/call`'s admission in process ({n} calls, after {} warm-up): the \
         tool lists alone as the handler checked them before the pipeline, then \
         `Pipeline::admit` with the tool lists, with 10 and 1,000 Cedar policies \
         (a baseline permit and per tool a principal's argument rule) and with one quota.\n",
        n / 10
    );
    println!("| admission | p50 µs | p99 µs |");
    println!("|---|---:|---:|");
    for (what, samples) in &rows {
        println!(
            "| {what} | {:.2} | {:.2} |",
            us(percentile(samples, 0.50)),
            us(percentile(samples, 0.99))
        );
    }
    println!("\n{grant_note}");
    Ok(())
}

/// `futures`' `BoxFuture`, which the `Grants` trait returns.
type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Grants from memory, for a run without PostgreSQL: the call's side of a
/// replica-wide quota is the same (it never waits on the grant).
struct MemoryGrants;

impl Grants for MemoryGrants {
    fn take<'a>(
        &'a self,
        _: &'a BudgetSpec,
        _: &'a str,
        want: u64,
        _: u64,
    ) -> BoxFuture<'a, Result<Grant, String>> {
        Box::pin(async move {
            Ok(Grant {
                calls: want,
                retry_after: None,
            })
        })
    }
    fn give_back<'a>(
        &'a self,
        _: &'a BudgetSpec,
        _: &'a str,
        _: u64,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

/// Calls per grant: a flood of back-to-back admissions (~0.4 µs each)
/// needs a batch that outlasts one grant's round trip (~130 µs).
const BATCH: u64 = 10_000;

/// One quota held in process against the same rule shared by replicas
/// (grants of [`BATCH`] from PostgreSQL with `--pg-url`, else from memory), call
/// by call in turn, yielding between calls (untimed) so the background
/// grant fetches run. Also the grant's own round trip, off the call path.
async fn replica_quota(
    env: &Env,
    call: &Call<'_>,
    n: usize,
) -> anyhow::Result<(Vec<(String, Vec<Duration>)>, String)> {
    let rule = |scope| QuotaConfig {
        name: Some("bench".into()),
        rate: Some(format!("{}/s", u32::MAX)),
        scope,
        batch: (scope == QuotaScope::Replicas).then_some(BATCH),
        ..Default::default()
    };
    let (grants, source): (Arc<dyn Grants>, &str) = match &env.pg_url {
        Some(url) => {
            let schema = new_id("wf_bench_quota").replace('-', "_");
            (
                Arc::new(Store::connect(url, 4, Some(&schema), None).await?),
                "PostgreSQL",
            )
        }
        None => (Arc::new(MemoryGrants), "memory (no --pg-url)"),
    };
    let local = Pipeline::default();
    local.set_quotas(Some(Quotas::from_config(
        &[rule(QuotaScope::Process)],
        None,
    )?));
    let shared = Pipeline::default();
    shared.set_quotas(Some(Quotas::from_config(
        &[rule(QuotaScope::Replicas)],
        Some(grants.clone()),
    )?));
    let warm = n / 10;
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut waited = 0usize;
    for i in 0..n + warm {
        let t = Instant::now();
        let ok = local.admit(call).is_ok();
        let took_a = t.elapsed();
        let t = Instant::now();
        let admitted = shared.admit(call);
        let took_b = t.elapsed();
        if !ok {
            anyhow::bail!("the local quota refused a call");
        }
        if let Err(e) = admitted {
            // Credit spent with the grant still on its way: refused, and timed too.
            anyhow::ensure!(e.message.contains("being fetched"), "refused: {e}");
            waited += 1;
        }
        if i >= warm {
            a.push(took_a);
            b.push(took_b);
        }
        tokio::task::yield_now().await;
    }
    let mut trips = Vec::new();
    let spec = BudgetSpec {
        rule: "bench-trip".into(),
        rate: Some((u32::MAX as u64, Duration::from_secs(1), u32::MAX as u64)),
        per_day: None,
    };
    for _ in 0..200 {
        let t = Instant::now();
        grants
            .take(&spec, "bench", BATCH, 0)
            .await
            .map_err(anyhow::Error::msg)?;
        trips.push(t.elapsed());
    }
    let note = format!(
        "Replica-wide quota: grants of {BATCH} from {source}; {waited} of {} calls found the \
         credit spent while a grant was on its way (refused; timed with the rest). One grant's round \
         trip (the `UPDATE … RETURNING`, off the call path): p50 {:.1} µs, p99 {:.1} µs.",
        n + warm,
        us(percentile(&trips, 0.50)),
        us(percentile(&trips, 0.99)),
    );
    Ok((
        vec![
            ("pipeline, one quota in process (A/B: A)".into(), a),
            (
                format!("pipeline, the same quota replica-wide, grants from {source} (A/B: B)"),
                b,
            ),
        ],
        note,
    ))
}
