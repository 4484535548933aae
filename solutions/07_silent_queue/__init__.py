"""Reports service: an API that hands slow work to Celery workers through named queues.

`celery_app.py` routes every schema task (`schema.*`) to the queue `schema`
and every insight task (`insight.*`) to the queue `insight`, so each kind can
get workers of its own; everything else goes to the default queue, `celery`.
`web.py` is the API: it returns a job id at once and reports the job's state.
Two deploy files start the processes: the `Procfile` (the hosting platform)
and `docker-compose.yml` (local and staging).

After the first deploy every job was accepted and stayed "PENDING" for good:
no error, no log line, nothing. Schema sync must succeed before any question
can be asked, so the service looked healthy and could not be used.

Your task:
1. Fix the deploy files, so that every queue the app routes to has a worker
   that consumes it, in each of them.
2. Make `guard.py`'s `unconsumed_queues(app, deploy_file)` a guard that CI
   can trust: it reads one deploy file (a Procfile or a docker-compose file)
   and the app's routes, and returns every queue no worker in that file
   consumes. It must understand `-Q a,b`, `--queues=a,b` and `--queues a,b`,
   a worker with no queue option (the app's default queue only, whatever the
   app calls it), and several worker services that split the queues.

The hidden tests start real workers from your deploy files' own command lines,
send every kind of task and wait for each to finish; they run your guard on
deploy files it has not seen. Keep the names `celery_app.app`, the task names,
`guard.unconsumed_queues(app, deploy_file)`, and the `worker` commands'
shape (`celery -A reports.celery_app worker ...`).

Run `loopkata check silent-queue` to grade your fix.
"""
