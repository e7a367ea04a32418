package sqlstore

import "github.com/larkrun/lark/internal/store/sqlcore"

// The entrypoints' reads and writes are all in sqlcore (Reader, Tx); the dialect's part is the
// tags filter (dialect.JSONArrayContains) and the duplicate check of InsertEntrypoint.

// scanner is a row (sqlcore.Scanner).
type scanner = sqlcore.Scanner
