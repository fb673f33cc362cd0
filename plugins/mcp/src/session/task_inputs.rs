//! The input a 2025-11-25 upstream's task asks for, offered to wf's clients
//! the SEP-2663 way. At 2025-11-25 a task in `input_required` sends its
//! requests (elicitation, sampling, roots) tagged with the task
//! (`_meta["io.modelcontextprotocol/related-task"]`) while the client waits
//! on `tasks/result`. wf's clients see tasks as SEP-2663 describes them, with
//! `inputRequests` in `tasks/get`, answered by `tasks/update`. So the runtime
//! waits on `tasks/result` for such a task, the client handler parks each
//! tagged request here under a key, `tasks/get` lists them, and `tasks/update`
//! answers them, which answers the upstream's request.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

/// The `_meta` key that ties a request to its task (2025-11-25).
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// How many requests one task may leave unanswered at once; more are refused
/// (an upstream cannot grow wf's memory through a task nobody answers).
const MAX_WAITING: usize = 16;

/// Tasks whose input is taken here, by the upstream's task id.
#[derive(Clone, Default)]
pub struct TaskInputs(Arc<Mutex<HashMap<String, Waiting>>>);

#[derive(Default)]
struct Waiting {
    next: u64,
    asked: BTreeMap<String, (Value, oneshot::Sender<Value>)>,
}

/// The upstream task a request of the upstream's belongs to, if it says.
pub fn related_task(request_meta: &Value, params: &Value) -> Option<String> {
    [request_meta, params.get("_meta").unwrap_or(&Value::Null)]
        .into_iter()
        .find_map(|meta| meta.get(RELATED_TASK)?.get("taskId")?.as_str())
        .map(str::to_owned)
}

impl TaskInputs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes `task_id`'s requests from now on; false if it already was.
    pub fn open(&self, task_id: &str) -> bool {
        let mut tasks = self.lock();
        if tasks.contains_key(task_id) {
            return false;
        }
        tasks.insert(task_id.to_owned(), Waiting::default());
        true
    }

    /// Stops taking `task_id`'s requests; those still waiting are refused.
    pub fn close(&self, task_id: &str) {
        self.lock().remove(task_id);
    }

    /// Parks a request of the task's until `tasks/update` answers it: the
    /// answer, or why there is none. `None` when the task's input is not
    /// taken here (the request goes to the caller, as any other).
    pub async fn ask(
        &self,
        task_id: &str,
        method: &str,
        mut params: Value,
    ) -> Option<Result<Value, String>> {
        // The upstream's task id stays the upstream's: clients know wf's.
        if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.remove(RELATED_TASK);
            if meta.is_empty() {
                params.as_object_mut().map(|p| p.remove("_meta"));
            }
        }
        let (tx, rx) = oneshot::channel();
        {
            let mut tasks = self.lock();
            let waiting = tasks.get_mut(task_id)?;
            if waiting.asked.len() >= MAX_WAITING {
                return Some(Err(format!(
                    "the task already waits for {MAX_WAITING} answers"
                )));
            }
            waiting.next += 1;
            let key = format!("{}-{}", method.replace('/', "-"), waiting.next);
            let request = json!({"method": method, "params": params});
            waiting.asked.insert(key, (request, tx));
        }
        Some(
            rx.await
                .map_err(|_| "the task ended before its input was given".to_owned()),
        )
    }

    /// The task's unanswered requests, as SEP-2663's `inputRequests`.
    pub fn requests(&self, task_id: &str) -> Map<String, Value> {
        self.lock()
            .get(task_id)
            .map(|w| {
                w.asked
                    .iter()
                    .map(|(key, (request, _))| (key.clone(), request.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Answers the task's requests named in `responses` (SEP-2663's
    /// `inputResponses`). Every key must name a request that waits.
    pub fn answer(&self, task_id: &str, responses: Map<String, Value>) -> Result<(), String> {
        let mut tasks = self.lock();
        let Some(waiting) = tasks.get_mut(task_id).filter(|w| !w.asked.is_empty()) else {
            return Err("the task is not waiting for input".into());
        };
        if let Some(unknown) = responses.keys().find(|k| !waiting.asked.contains_key(*k)) {
            return Err(format!("the task asked nothing as {unknown:?}"));
        }
        for (key, response) in responses {
            if let Some((_, tx)) = waiting.asked.remove(&key) {
                let _ = tx.send(response);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_parked_request_is_listed_then_answered() {
        let inputs = TaskInputs::default();
        let params = json!({"message": "which?", "_meta": {RELATED_TASK: {"taskId": "up-1"}}});
        assert_eq!(related_task(&Value::Null, &params).as_deref(), Some("up-1"));
        // Not opened: the request is not taken here.
        assert!(
            inputs
                .ask("up-1", "elicitation/create", params.clone())
                .await
                .is_none()
        );
        assert!(inputs.open("up-1") && !inputs.open("up-1"));
        let asking = {
            let inputs = inputs.clone();
            tokio::spawn(async move { inputs.ask("up-1", "elicitation/create", params).await })
        };
        let listed = loop {
            let r = inputs.requests("up-1");
            if !r.is_empty() {
                break r;
            }
            tokio::task::yield_now().await;
        };
        let (key, request) = listed.iter().next().unwrap();
        // The upstream's id is not shown.
        assert_eq!(
            request,
            &json!({"method": "elicitation/create", "params": {"message": "which?"}})
        );
        let unknown = Map::from_iter([("nope".to_string(), json!({}))]);
        assert!(inputs.answer("up-1", unknown).unwrap_err().contains("nope"));
        let answer = json!({"action": "accept", "content": {"x": 1}});
        inputs
            .answer("up-1", Map::from_iter([(key.clone(), answer.clone())]))
            .unwrap();
        assert_eq!(asking.await.unwrap(), Some(Ok(answer)));
        assert!(inputs.requests("up-1").is_empty());
        assert!(inputs.answer("up-1", Map::new()).is_err(), "nothing waits");
    }

    #[tokio::test]
    async fn closing_refuses_what_waits_and_the_waiting_are_bounded() {
        let inputs = TaskInputs::default();
        inputs.open("t");
        let mut asking = Vec::new();
        for _ in 0..MAX_WAITING {
            let inputs = inputs.clone();
            asking.push(tokio::spawn(async move {
                inputs.ask("t", "roots/list", json!({})).await
            }));
        }
        while inputs.requests("t").len() < MAX_WAITING {
            tokio::task::yield_now().await;
        }
        let over = inputs.ask("t", "roots/list", json!({})).await;
        assert!(
            matches!(over, Some(Err(ref e)) if e.contains("already waits")),
            "{over:?}"
        );
        inputs.close("t");
        for a in asking {
            assert!(matches!(a.await.unwrap(), Some(Err(_))));
        }
    }
}
