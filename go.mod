module github.com/renderbox/renderbox

go 1.26.8

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/opencontainers/runtime-spec v1.3.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/getkin/kin-openapi v0.153.0
	github.com/go-openapi/jsonpointer v0.22.5 // indirect
	github.com/go-openapi/swag/jsonname v0.25.5 // indirect
	github.com/gorilla/mux v1.8.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	go.yaml.in/yaml/v4 v4.0.0 // indirect
	golang.org/x/text v0.14.0 // indirect
)
