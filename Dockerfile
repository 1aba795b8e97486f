# One image for every service of docker-compose.yml: web (gunicorn + whitenoise), worker, beat.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    DJANGO_SETTINGS_MODULE=hetplanner.settings.production

WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt

COPY . .
# Static files are collected into the image (whitenoise serves them, hashed and compressed);
# the key and hosts here exist only for this build step.
RUN DJANGO_SECRET_KEY=collectstatic-only DJANGO_ALLOWED_HOSTS=localhost \
    python manage.py collectstatic --noinput --verbosity 0 \
 && useradd --create-home --uid 1000 app \
 && mkdir -p /app/var \
 && chown -R app /app/var

USER app
EXPOSE 8000
CMD ["gunicorn", "hetplanner.wsgi:application", "--config", "hetplanner/gunicorn.py"]
