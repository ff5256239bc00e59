// Package turnd holds the artefacts that belong to the project as a whole:
// the OpenAPI contract served at /openapi.yaml and held against the router
// by the api tests.
package turnd

import _ "embed"

// OpenAPI is the HTTP contract (OpenAPI 3.1), openapi.yaml at the
// repository root.
//
//go:embed openapi.yaml
var OpenAPI []byte
