{{/* The release's name, shortened to what label values allow. */}}
{{- define "renderbox.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "renderbox.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component (api or worker). */}}
{{- define "renderbox.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "renderbox.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "renderbox.secretName" -}}
{{- required "secrets.name is required" .Values.secrets.name -}}
{{- end -}}

{{/*
Where Redis is, for both programs: the address in plain (it never holds a
password: -redis refuses one), the password from the Secret.
*/}}
{{- define "renderbox.redisEnv" -}}
- name: RENDERBOX_REDIS
  value: {{ required "redis.address is required" .Values.redis.address | quote }}
{{- with .Values.redis.passwordKey }}
- name: RENDERBOX_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "renderbox.secretName" $ }}
      key: {{ . }}
{{- end }}
{{- if .Values.redis.caSecret }}
- name: RENDERBOX_REDIS_CA_FILE
  value: /etc/renderbox/redis-ca/ca.crt
{{- end }}
{{- with .Values.redis.serverName }}
- name: RENDERBOX_REDIS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- with .Values.ceilings }}
- name: RENDERBOX_CEILINGS
  value: {{ . | quote }}
{{- end }}
{{- with .Values.deliver.buckets }}
- name: RENDERBOX_DELIVER_BUCKETS
  value: {{ . | quote }}
{{- end }}
{{- with .Values.blobs }}
{{- if .url }}
- name: RENDERBOX_BLOBS
  value: {{ .url | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The store's keys, only where they are used: the API and the workers
for blobs.url, the workers alone for deliver.s3 (root, worker). */}}
{{- define "renderbox.awsEnv" -}}
{{- $v := .root.Values -}}
{{- if or $v.blobs.url (and .worker $v.deliver.s3) }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ include "renderbox.secretName" .root }}
      key: {{ $v.blobs.accessKeyIDKey }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "renderbox.secretName" .root }}
      key: {{ $v.blobs.secretAccessKeyKey }}
{{- end }}
{{- end -}}

{{/* The workers' side of delivery: the store deliver.buckets are in. */}}
{{- define "renderbox.workerDeliverEnv" -}}
{{- with .Values.deliver.s3 }}
- name: RENDERBOX_DELIVER_S3
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The API's side of the object store: how downloads are answered. */}}
{{- define "renderbox.apiBlobsEnv" -}}
{{- if .Values.blobs.url }}
- name: RENDERBOX_BLOBS_DOWNLOADS
  value: {{ .Values.blobs.downloads | quote }}
- name: RENDERBOX_BLOBS_PRESIGN_EXPIRY
  value: {{ .Values.blobs.presignExpiry | quote }}
{{- end }}
{{- end -}}

{{/* Plain settings from a map, refusing the ones that are secrets. */}}
{{- define "renderbox.extraEnv" -}}
{{- range $name, $value := . }}
{{- if has $name (list "RENDERBOX_REDIS_PASSWORD" "RENDERBOX_REDIS_URL" "RENDERBOX_DB" "AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY") }}
{{- fail (printf "%s holds a secret: give it through the Secret (secrets.name), not as a plain value" $name) }}
{{- end }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{- define "renderbox.redisCAVolume" -}}
{{- if .Values.redis.caSecret }}
- name: redis-ca
  secret:
    secretName: {{ .Values.redis.caSecret }}
    items:
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- end -}}

{{- define "renderbox.redisCAMount" -}}
{{- if .Values.redis.caSecret }}
- name: redis-ca
  mountPath: /etc/renderbox/redis-ca
  readOnly: true
{{- end }}
{{- end -}}
