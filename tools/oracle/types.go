package main

import (
	"reflect"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// typeTree describes the JSON shape of the resource.k8s.io kinds (and of the
// scheduling.k8s.io/v1beta1 Workload and PodGroup), field by field, as
// their Go types define it: {"object": {field: shape}}, {"list": shape}, {"map": shape}
// or a scalar name. Object metadata is a leaf ("meta"): it is not part of the DRA API.
func typeTree() (any, error) {
	kinds := map[string]any{
		"v1/DeviceClass":              (*resourceapi.DeviceClass)(nil),
		"v1/ResourceClaim":            (*resourceapi.ResourceClaim)(nil),
		"v1/ResourceClaimTemplate":    (*resourceapi.ResourceClaimTemplate)(nil),
		"v1/ResourceSlice":            (*resourceapi.ResourceSlice)(nil),
		"v1/DeviceTaintRule":          (*resourceapi.DeviceTaintRule)(nil),
		"v1beta2/DeviceTaintRule":     (*resourcev1beta2.DeviceTaintRule)(nil),
		"scheduling/v1beta1/Workload": (*schedulingv1beta1.Workload)(nil),
		"scheduling/v1beta1/PodGroup": (*schedulingv1beta1.PodGroup)(nil),
	}
	out := map[string]any{}
	for name, kind := range kinds {
		out[name] = shape(reflect.TypeOf(kind).Elem(), nil)
	}
	return out, nil
}

var leaves = map[reflect.Type]string{
	reflect.TypeFor[resource.Quantity]():    "quantity",
	reflect.TypeFor[metav1.Time]():          "time",
	reflect.TypeFor[runtime.RawExtension](): "any",
	reflect.TypeFor[metav1.ObjectMeta]():    "meta",
	reflect.TypeFor[metav1.TypeMeta]():      "meta",
}

// shape describes t; `outer` are the structs it is nested in: a struct inside itself (a
// composite pod group template holds templates of its own kind) is {"recursive": name}.
func shape(t reflect.Type, outer []reflect.Type) any {
	if leaf, ok := leaves[t]; ok {
		return leaf
	}
	switch t.Kind() {
	case reflect.Pointer:
		return shape(t.Elem(), outer)
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
		return map[string]any{"list": shape(t.Elem(), outer)}
	case reflect.Map:
		return map[string]any{"map": shape(t.Elem(), outer)}
	case reflect.Struct:
		for _, o := range outer {
			if o == t {
				return map[string]any{"recursive": t.Name()}
			}
		}
		fields := map[string]any{}
		addFields(t, fields, append(outer, t))
		return map[string]any{"object": fields}
	}
	return t.Kind().String()
}

// addFields adds a struct's JSON fields; embedded structs without a JSON name (and
// TypeMeta, which the API inlines) contribute their own fields.
func addFields(t reflect.Type, fields map[string]any, outer []reflect.Type) {
	for i := range t.NumField() {
		field := t.Field(i)
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if name == "-" || !field.IsExported() {
			continue
		}
		if field.Anonymous && name == "" {
			if field.Type == reflect.TypeFor[metav1.TypeMeta]() {
				fields["apiVersion"], fields["kind"] = "string", "string"
				continue
			}
			addFields(field.Type, fields, outer)
			continue
		}
		if name == "" {
			name = field.Name
		}
		fields[name] = shape(field.Type, outer)
	}
}
