{{/* The pod template of the training Job / PyTorchJob replicas (see training.yaml). */}}
{{- define "electra.trainingPod" -}}
{{- $v := .root.Values }}
{{- $tr := $v.training -}}
metadata:
  labels:
    {{- include "electra.commonLabels" .root | nindent 4 }}
    {{- toYaml .labels | nindent 4 }}
spec:
  restartPolicy: {{ .restartPolicy }}
  {{- with .subdomain }}
  subdomain: {{ . }}
  {{- end }}
  automountServiceAccountToken: false
  enableServiceLinks: false
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.runtimeClassName }}
  runtimeClassName: {{ . }}
  {{- end }}
  {{- with $v.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  # SIGTERM makes `electra pretrain` write a checkpoint and exit; leave it time for that.
  terminationGracePeriodSeconds: 300
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
  containers:
    - name: pytorch
      image: {{ include "electra.trainingImage" .root | quote }}
      imagePullPolicy: {{ $tr.image.pullPolicy }}
      command:
        - torchrun
      args:
        {{- toYaml .args | nindent 8 }}
      env:
        - name: HOME
          value: /tmp
        - name: PYTHONUNBUFFERED
          value: "1"
        {{- with $tr.env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: rdzv
          containerPort: {{ $tr.rdzvPort }}
          protocol: TCP
      resources:
        {{- toYaml .resources | nindent 8 }}
      securityContext:
        {{- toYaml $v.securityContext | nindent 8 }}
      volumeMounts:
        - name: data
          mountPath: /data
          readOnly: true
        - name: runs
          mountPath: /runs
        - name: tmp
          mountPath: /tmp
        - name: dshm
          mountPath: /dev/shm
  volumes:
    - name: data
      persistentVolumeClaim:
        claimName: {{ $tr.dataClaim }}
        readOnly: true
    - name: runs
      persistentVolumeClaim:
        claimName: {{ $tr.runsClaim }}
    - name: tmp
      emptyDir:
        sizeLimit: 20Gi
    - name: dshm
      emptyDir:
        medium: Memory
        sizeLimit: {{ $tr.shmSizeLimit }}
  {{- with .nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $tr.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
