package main

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// bigSchema returns a deterministic structural openAPI schema of about size
// bytes of JSON, shaped like a real operator's: many documented fields of
// every type, nested objects and arrays.
func bigSchema(size int) *apiextensionsv1.JSONSchemaProps {
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Description: words(0, 30), Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
	root := &apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: words(1, 40),
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": {Type: "string", Description: words(2, 20)},
			"kind":       {Type: "string", Description: words(3, 20)},
			"metadata":   {Type: "object"},
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"conditions": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr(true),
				}}},
			}},
		},
	}
	for i := 0; ; i++ {
		spec.Properties[fmt.Sprintf("field%03d", i)] = field(i)
		if i%8 == 7 {
			root.Properties["spec"] = spec
			if b, err := root.Marshal(); err != nil || len(b) >= size {
				return root
			}
		}
	}
}

func field(i int) apiextensionsv1.JSONSchemaProps {
	d := words(i, 50)
	str := apiextensionsv1.JSONSchemaProps{Type: "string", Description: words(i+1, 25), MaxLength: ptr[int64](253)}
	switch i % 4 {
	case 0:
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: d, MaxLength: ptr[int64](63), Pattern: `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`}
	case 1:
		return apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Description: d, Minimum: ptr(0.0), Maximum: ptr(65535.0)}
	case 2:
		return apiextensionsv1.JSONSchemaProps{Type: "array", Description: d, Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Required: []string{"name"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": str, "value": str, "valueFrom": str},
		}}}
	default:
		return apiextensionsv1.JSONSchemaProps{Type: "object", Description: d, Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"enabled":  {Type: "boolean", Description: words(i+2, 20)},
			"mode":     {Type: "string", Description: words(i+3, 20), Enum: []apiextensionsv1.JSON{{Raw: []byte(`"Auto"`)}, {Raw: []byte(`"Manual"`)}}},
			"replicas": {Type: "integer", Format: "int32", Description: words(i+4, 20)},
			"image":    str,
		}}
	}
}

var vocabulary = strings.Fields(`the operator controller reconciles resource field value when set defaults
to namespace cluster replicas image pull policy secret reference volume mount path port protocol
service account annotation label selector matches template specification status condition`)

// words returns n deterministic words of documentation text.
func words(seed, n int) string {
	w := make([]string, n)
	for j := range w {
		w[j] = vocabulary[(seed*7+j*13+j*j)%len(vocabulary)]
	}
	return strings.Join(w, " ") + "."
}
