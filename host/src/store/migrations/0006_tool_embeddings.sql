-- The semantic ranker's tool vectors (docs/operator-manual.md, "Large
-- catalogs"), by embedding model and the hash of the text embedded, so an
-- unchanged tool is not embedded again after a restart or on another
-- replica. `vector` is hex of little-endian f32s. Same text on both backends.
CREATE TABLE IF NOT EXISTS tool_embeddings (
    model       TEXT NOT NULL,
    hash        TEXT NOT NULL,
    dim         BIGINT NOT NULL,
    vector      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (model, hash)
);
