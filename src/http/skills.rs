//! `GET /api/skills`: the skills a working directory sees, and the bad ones with their reasons.

use axum::Json;
use axum::extract::{Query, State};

use super::error::ApiError;
use super::state::AppState;
use crate::api::requests::CwdQuery;
use crate::api::responses::SkillList;

#[utoipa::path(
    get,
    path = "/api/skills",
    tag = "meta",
    summary = "The skills a working directory sees",
    description = "Skills (`SKILL.md` in a directory of its own) from the user's config directory \
        (`skills/`), then from `.agents/skills/` and `.claude/skills/` of each directory from the \
        repository's top down to `cwd`; a later one wins a name. `problems` lists the files \
        skipped, each with the rule it breaks. Turns read them anew when they start.",
    params(CwdQuery),
    responses(
        (status = 200, description = "The skills and the files skipped", body = SkillList),
        (status = 400, description = "`cwd` is not absolute", body = crate::api::errors::ErrorBody),
        (status = 422, description = "`cwd` is missing or refused", body = crate::api::errors::ErrorBody),
    ),
)]
pub async fn skills(
    State(state): State<AppState>,
    Query(query): Query<CwdQuery>,
) -> Result<Json<SkillList>, ApiError> {
    Ok(Json(state.runtime.skills(query.cwd).await?))
}
